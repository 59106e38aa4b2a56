"""The offline summariser: deterministic, and it reads only the request it is sent.

It sees what a real summariser would — the turns to replace, the ledger roles,
the pinned rules and the previous summary — and writes the required fields,
naming entities by [role] and never by value. Amounts and dates are not
identifiers and stay as written. Only calls whose result shows they ran are
recorded as actions, and pleasantries and questions are not decisions. It
never touches the database.

SUNDRY_OFFLINE_SUMMARISER_DELAY (seconds, float): when set, each call sleeps
that long first. Tests use it to kill a worker mid-compaction.
"""

from __future__ import annotations

import json
import os
import re
import time

from sundry.compaction import summariser as s
from sundry.context.constraints import constraint_sentences
from sundry.context.idformats import find_id_shaped, find_ids
from sundry.context.render import format_money
from sundry.tooling.messages import ModelRequest, ModelResponse, Usage

DELAY_ENV = "SUNDRY_OFFLINE_SUMMARISER_DELAY"
_TURN = re.compile(r"^\[turn (\d+)\] (.*)$")
_LOOKUPS = ("get_", "search_", "lookup_", "track_", "list_", "find_")
MAX_ITEMS = 6
MAX_CHARS = 160
_CALL = re.compile(r"(\w+)\((\{.*?\})\)")
_RESULT = re.compile(r"^result of (\w+): (.*)$")
_HELD = re.compile(r"held_for_staff_approval|call is held|held for (?:staff )?approval", re.I)


def _result_ok(text: str) -> bool:
    return not text.startswith("ERROR") and not _HELD.search(text)


def _moved(text: str) -> str:
    """The amount a tool result reports, e.g. " — 40.00 USD", from its JSON fields."""
    try:
        data = json.loads(text)
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    refund = data.get("refund") if isinstance(data.get("refund"), dict) else data
    currency = refund.get("currency")
    amount = refund.get("amount")
    if isinstance(refund.get("amount_cents"), int) and isinstance(currency, str):
        return f" — {format_money(refund['amount_cents'], currency)}"
    if isinstance(amount, str) and isinstance(currency, str):
        return f" — {amount} {currency}"
    return ""


def _sections(body: str) -> dict[str, list[str]]:
    heads = {
        s.LEDGER_SECTION: "ledger",
        s.RULES_SECTION: "rules",
        s.PREVIOUS_SECTION: "previous",
        s.TURNS_SECTION: "turns",
        s.QUOTES_SECTION: "quotes",
    }
    out: dict[str, list[str]] = {v: [] for v in heads.values()}
    current = None
    for line in body.splitlines():
        head = next((k for h, k in heads.items() if line.startswith(h)), None)
        if head:
            current = head
        elif current and line.strip() and line.strip() != s.NONE_LINE:
            out[current].append(line)
    return out


class OfflineSummariser:
    name = "offline-summariser"
    # The constraint classifier, for a request that lists no sentences to quote (the harness's controls
    # switch it off); a request that lists them is quoted exactly as listed.
    classifier = staticmethod(constraint_sentences)

    def complete(self, request: ModelRequest) -> ModelResponse:
        delay = float(os.environ.get(DELAY_ENV) or 0)
        if delay > 0:
            time.sleep(delay)
        body = next((m.content for m in request.messages if m.role == "user"), "")
        fields = self.summarise(body)
        text = json.dumps(fields, ensure_ascii=False)
        return ModelResponse(
            text=text,
            model=self.name,
            offline=True,
            usage=Usage(input_tokens=len(body) // 4, output_tokens=len(text) // 4),
        )

    def summarise(self, body: str) -> dict:
        sec = _sections(body)
        roles: dict[str, str] = {}
        for line in sec["ledger"]:
            parts = [p.strip() for p in line.split(" | ")]
            if len(parts) >= 2 and parts[1]:
                roles[parts[1]] = parts[0]
        pinned = {line[2:].strip().lower() for line in sec["rules"] if line.startswith("- ")}

        def mask(text: str) -> str:
            # Longest values first, so one value inside another cannot leak a fragment.
            for value in sorted(roles, key=len, reverse=True):
                text = text.replace(value, f"[{roles[value]}]")
            for _, value in find_ids(text):
                text = text.replace(value, "[unlisted id]")
            # Amounts and dates are facts, not identifiers: set aside before ID-shaped tokens are masked.
            kept: list[str] = []

            def keep(m: re.Match) -> str:
                kept.append(m.group(0))
                return f"\x00{len(kept) - 1}\x00"

            text = s.AMOUNT_OR_DATE.sub(keep, text)
            for token in find_id_shaped(re.sub(r"\[[^\]]*\]|\x00\d+\x00", " ", text)):
                text = re.sub(rf"\b{re.escape(token)}\b", "[unlisted id]", text)
            return re.sub(r"\x00(\d+)\x00", lambda m: kept[int(m.group(1))], text)

        def short(text: str) -> str:
            text = " ".join(mask(text).split())
            return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1].rstrip() + "…"

        turns = [(int(m.group(1)), m.group(2)) for line in sec["turns"] if (m := _TURN.match(line))]
        # The sentences the request lists to quote: word for word, none dropped, none shortened.
        listed = sec["quotes"] if s.QUOTES_SECTION in body else None
        decisions, actions, constraints, questions, tools, held = [], [], [], [], [], []
        customer_msgs = 0
        pending_question = None
        # Calls waiting for their result, oldest first: an action is recorded only once its result shows it ran.
        waiting: list[tuple[int, str, str]] = []
        for number, rest in turns:
            if rest.startswith("customer message: "):
                text = rest.removeprefix("customer message: ")
                customer_msgs += 1
                if listed is None:
                    for sentence in self.classifier(text):
                        if sentence.lower() not in pinned and s.quote_text(sentence, roles) not in constraints:
                            constraints.append(s.quote_text(sentence, roles))
                pending_question = (number, text) if "?" in text else None
            elif rest.startswith(("agent message: ", "staff message: ")):
                if decided := s.decision_text(rest.split(": ", 1)[1]):
                    decisions.append(f"turn {number}: {short(decided)}")
                pending_question = None
            elif rest.startswith("agent called "):
                for call in _CALL.finditer(rest):
                    name = call.group(1)
                    tools.append(name)
                    if not name.startswith(_LOOKUPS):
                        target = ", ".join(f"[{roles[v]}]" for v in roles if v in call.group(2)) or "no listed target"
                        waiting.append((number, name, target))
            elif (result := _RESULT.match(rest)) and (
                i := next((k for k, w in enumerate(waiting) if w[1] == result.group(1)), None)
            ) is not None:
                called_at, name, target = waiting.pop(i)
                if _result_ok(result.group(2)):
                    actions.append(f"turn {called_at}: {name} on {target}{_moved(result.group(2))}")
                elif _HELD.search(result.group(2)):
                    held.append(f"turn {called_at}: {name} on {target} is held for staff approval (not done)")
        questions.extend(held)
        if pending_question:
            questions.append(f"customer asked at turn {pending_question[0]}: {short(pending_question[1])}")
        span = f"{turns[0][0]}–{turns[-1][0]}" if turns else "none"
        used = sorted(set(tools))
        narrative = (
            f"Turns {span}: the customer wrote {customer_msgs} message(s); the agent made {len(tools)} "
            f"tool call(s) ({', '.join(used) or 'none'}) and replied {len(decisions)} time(s)."
        )
        # Fold the previous summary in, as the request asks: its lists carry forward
        # (oldest dropped first past the caps), and its narrative is kept without
        # its own "Earlier: …" prefix so chained compactions do not nest prefixes.
        before = _previous_fields(sec["previous"])
        if before["narrative"]:
            narrative = f"Earlier: {short(_own_span(before['narrative']))} " + narrative
        replied = bool(decisions)
        carried = [c for c in before["constraints_not_pinned"] if c.lower() not in pinned]
        quoted = list(dict.fromkeys(listed)) if listed is not None else list(dict.fromkeys([*carried, *constraints]))
        return {
            "decisions": [*before["decisions"], *decisions][-MAX_ITEMS:],
            "actions_taken": [*before["actions_taken"], *actions][-MAX_ITEMS * 2 :],
            "constraints_not_pinned": quoted,
            # A reply in the new turns is taken to answer what was still open before.
            "open_questions": ([] if replied else before["open_questions"]) + questions,
            "narrative": narrative,
        }


_HEADS = {
    "Decisions made:": "decisions",
    "Actions taken": "actions_taken",
    "Customer constraints not yet pinned:": "constraints_not_pinned",
    "Open questions:": "open_questions",
}
_SPAN_START = re.compile(r"Turns \d+–\d+: ")


def _previous_fields(lines: list[str]) -> dict:
    """The previous summary's fields, read back from its rendered text (`summariser.render_fields`).

    A summary in another shape (a fallback trim) yields only its first line as the narrative.
    """
    out: dict = {"narrative": "", **{k: [] for k in _HEADS.values()}}
    current = None
    for line in lines:
        head = next((k for h, k in _HEADS.items() if line.startswith(h)), None)
        if head:
            current = head
        elif current and line.startswith("- "):
            item = line[2:].strip()
            if item and item != "none":
                out[current].append(item)
        elif not out["narrative"] and current is None:
            out["narrative"] = line.strip()
    return out


def _own_span(narrative: str) -> str:
    """A narrative without the "Earlier: …" it carried from the summary before it."""
    starts = list(_SPAN_START.finditer(narrative))
    return narrative[starts[-1].start() :] if starts else narrative
