"""The summariser's fixed template, its output schema and validation, and the fallback.

Pure: the service hands in plain data (turns, ledger, rules, previous summary)
and gets back a ModelRequest, or a verdict on what the model wrote.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sundry.compaction import faithful, statements
from sundry.context.constraints import constraint_sentences
from sundry.context.idformats import find_id_shaped, find_ids
from sundry.context.lanes import LedgerData, RuleData, SummaryData, TurnData
from sundry.context.render import render_summary, turns_to_messages
from sundry.context.rules import candidate_rules
from sundry.core.tokens import count_message_tokens, count_tokens
from sundry.tooling.domain import Domain, get_domain
from sundry.tooling.messages import Message, ModelRequest, OutputSpec

# The first answer and one retry that shows the model the exact validation errors.
MAX_ATTEMPTS = 2
OUTPUT_NAME = "record_summary"
REQUIRED_FIELDS = ("decisions", "actions_taken", "constraints_not_pinned", "open_questions", "narrative")

# Section headings of the user message; the offline summariser parses these.
LEDGER_SECTION = "LEDGER ROLES (role | value | kind) — refer to each entity ONLY as [role]; never write its value"
RULES_SECTION = "RULES ALREADY PINNED (do not repeat them as constraints)"
PREVIOUS_SECTION = "PREVIOUS SUMMARY (fold it into yours)"
TURNS_SECTION = "TURNS TO SUMMARISE"
QUOTES_SECTION = "CUSTOMER SENTENCES TO QUOTE — copy each line, word for word, as one item of constraints_not_pinned"
NONE_LINE = "(none)"

# Amounts ("40.00 USD", "2,899.00 INR", "$40", "11599.00") and dates ("2025-03-01") are facts a summary
# keeps as written; they are never identifiers, however many digits they have.
AMOUNT_OR_DATE = re.compile(
    r"[$€£₹]\s?\d[\d,]*(?:\.\d+)?"
    r"|\b(?:USD|EUR|GBP|INR)\s?\d[\d,]*(?:\.\d+)?"
    r"|\b\d[\d,]*(?:\.\d+)?\s?(?:USD|EUR|GBP|INR)\b"
    r"|\b\d[\d,]*\.\d{2}\b"
    r"|\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?Z?)?\b"
)
# A sentence that decides nothing: courtesy, greeting, an offer of more help, or a bare acknowledgement.
_PLEASANTRY = re.compile(
    r"^(?:you'?re (?:very )?welcome|thanks?\b|thank you|hello|hi\b|hey\b|good (?:morning|afternoon|evening)|"
    r"is there anything else|anything else|happy to help|glad to help|have a (?:nice|good|great)|"
    r"how can i help|sorry to hear|i'?m sorry|no problem|of course|"
    r"(?:noted|understood|got it|ok(?:ay)?|sure|will do|certainly|al(?:l )?right|right|great|perfect|fine|cool|"
    r"excellent|very well|sounds good)[.!]*$)",
    re.I,
)
# A sentence ends at . ! or ? followed by a space or the end, so "40.00 USD" stays whole.
_SENTENCES = re.compile(r"\S.*?(?:[.!?]+(?=\s|$)|$)")

TEMPLATE = """You write the compacted record of the early part of a customer-support ticket.
Another model will keep working the ticket from your record plus structured lanes
(pinned rules, an ID ledger, and state holding every action and money movement).

Answer with ONE JSON object and nothing else, with exactly these keys, all required:
  "decisions": [strings] — decisions already made, so they are not re-litigated;
  "actions_taken": [strings] — actions already done (refunds, returns, messages …);
  "constraints_not_pinned": [strings] — things the customer asked for or ruled out
      that are NOT already in the pinned rules: first every line listed under
      CUSTOMER SENTENCES TO QUOTE, copied exactly, then any other you find;
  "open_questions": [strings] — what the thread is still waiting on;
  "narrative": string — a short account of what happened.
Use [] for an empty list. Name every order, customer, item, payment, refund,
return or parcel ONLY by its ledger role in square brackets, e.g. [damaged_order];
never write an identifier's value, and never invent one. Be much shorter than the
turns you replace: keep decisions, actions, constraints and open questions; drop texture."""


class SummaryFields(BaseModel):
    """What the summariser must return. Every field is required."""

    model_config = ConfigDict(extra="ignore")

    decisions: list[str]
    actions_taken: list[str]
    constraints_not_pinned: list[str]
    open_questions: list[str]
    narrative: str = Field(min_length=1)


# --- the request -----------------------------------------------------------------------


def turn_line(t: TurnData) -> str:
    """One turn as a line the summariser (and the offline summariser) reads."""
    p = t.payload or {}
    text = " ".join((t.text or "").split())  # one line per turn
    if t.kind == "tool_call":
        calls = [c for c in p.get("calls") or [] if isinstance(c, dict)]
        body = "; ".join(
            f"{c.get('name')}({json.dumps(c.get('arguments') or {}, sort_keys=True, ensure_ascii=False)})"
            for c in calls
        )
        return f"[turn {t.number}] agent called {body}" + (f" — {text}" if text else "")
    if t.kind == "tool_result":
        return f"[turn {t.number}] result of {p.get('name') or 'tool'}: {text}"
    return f"[turn {t.number}] {t.author} {t.kind}: {text}"


def build_request(
    *,
    model: str,
    turns: list[TurnData],
    ledger: list[LedgerData],
    rules: list[RuleData],
    previous: SummaryData | None,
    classifier=constraint_sentences,
) -> ModelRequest:
    ledger_lines = [f"{e.role} | {e.value} | {e.kind}" for e in ledger] or [NONE_LINE]
    quotes = required_quotes(
        turns, rules=rules, previous=previous, roles={e.value: e.role for e in ledger}, classifier=classifier
    )
    rule_lines = [f"- {r.text}" for r in rules] or [NONE_LINE]
    prev = [previous.text.strip()] if previous else [NONE_LINE]
    span = f"{turns[0].number}–{turns[-1].number}" if turns else ""
    body = "\n".join(
        [
            LEDGER_SECTION,
            *ledger_lines,
            "",
            RULES_SECTION,
            *rule_lines,
            "",
            f"{PREVIOUS_SECTION}" + (f" covering turns 1–{previous.covers_through_turn}" if previous else ""),
            *prev,
            "",
            f"{TURNS_SECTION} {span}",
            *[turn_line(t) for t in turns],
            "",
            QUOTES_SECTION,
            *(quotes or [NONE_LINE]),
        ]
    )
    # Providers with structured output are asked for the fields through it; the template asks for the
    # same JSON in text, which is what a model without it (or the offline summariser) answers with.
    return ModelRequest(
        model=model,
        messages=[Message(role="system", content=TEMPLATE), Message(role="user", content=body)],
        output=OutputSpec(name=OUTPUT_NAME, description="The compacted record of the turns.", schema=output_schema()),
    )


def quote_text(sentence: str, roles: dict[str, str]) -> str:
    """A customer's sentence as a summary may hold it: word for word, except that a ledger value is
    written as its [role] and any other identifier as [unlisted id] (validation refuses values)."""
    text = " ".join((sentence or "").split())
    for value in sorted(roles, key=len, reverse=True):  # longer first: one value may contain another
        text = re.sub(rf"(?<![\w-]){re.escape(value)}(?![\w])", f"[{roles[value]}]", text)
    for _, value in find_ids(text):
        text = text.replace(value, "[unlisted id]")
    kept: list[str] = []

    def keep(m: re.Match) -> str:  # amounts and dates are facts, not identifiers
        kept.append(m.group(0))
        return f"\x00{len(kept) - 1}\x00"

    text = AMOUNT_OR_DATE.sub(keep, text)
    for token in find_id_shaped(re.sub(r"\[[^\]]*\]|\x00\d+\x00", " ", text)):
        text = re.sub(rf"\b{re.escape(token)}\b", "[unlisted id]", text)
    return re.sub(r"\x00(\d+)\x00", lambda m: kept[int(m.group(1))], text)


def previous_constraints(previous: SummaryData | None) -> list[str]:
    """The constraints a previous summary carried (its rendered "Customer constraints not yet pinned:")."""
    out, inside = [], False
    for line in (previous.text if previous else "").splitlines():
        if line.startswith("Customer constraints not yet pinned:"):
            inside = True
        elif inside and line.startswith("- "):
            if line[2:].strip() and line[2:].strip() != "none":
                out.append(line[2:].strip())
        elif inside:
            inside = False
    return out


def required_quotes(
    turns: list[TurnData],
    *,
    rules: list[RuleData],
    previous: SummaryData | None,
    roles: dict[str, str],
    classifier=constraint_sentences,
) -> list[str]:
    """What the summary's constraints must hold word for word: every customer sentence of the span
    the constraint classifier flags (`context.constraints`, the low threshold), and every constraint
    the previous summary carried, less those already in the rules lane."""
    pinned = {" ".join(r.text.split()).lower() for r in rules}
    out = list(previous_constraints(previous))
    for t in turns:
        if t.author == "customer" and t.kind == "message":
            out += [quote_text(s, roles) for s in classifier(t.text or "") if " ".join(s.split()).lower() not in pinned]
    return [q for q in dict.fromkeys(out) if q.lower() not in pinned]


def rule_candidate_texts(constraints: list[str], quotes: list[str] | None) -> list[str]:
    """The summary's constraints that become candidate rules (enforced at once). A required quote
    does so only where the enforce threshold (`rules.candidate_rules`, the live path's) flags it: a
    sentence quoted because the low threshold flagged it is kept word for word, never enforced on
    that alone. Anything else the summariser wrote becomes a candidate as before."""
    quoted = set(quotes or ())
    return [c for c in constraints if c not in quoted or candidate_rules(c)]


def output_schema() -> dict:
    """SummaryFields as a strict JSON schema: every field required, nothing else allowed."""
    schema = SummaryFields.model_json_schema()
    schema["additionalProperties"] = False
    schema["required"] = list(REQUIRED_FIELDS)
    return schema


def retry_request(request: ModelRequest, raw: str, verdict: "Verdict") -> ModelRequest:
    """The request again, with the rejected answer and the exact validation errors after it."""
    problems = "\n".join(f"- {d}" for d in verdict.details) or "- " + ", ".join(verdict.reasons)
    note = (
        "Your summary was rejected for these reasons:\n"
        + problems
        + "\nAnswer again with the corrected JSON object only, keeping every required key."
    )
    return request.model_copy(
        update={
            "messages": [
                *request.messages[:2],
                Message(role="assistant", content=raw or "(no answer)"),
                Message(role="user", content=note),
            ]
        }
    )


def replaced_tokens(turns: list[TurnData], previous: SummaryData | None, model: str) -> int:
    """What the new summary replaces in the working request: those turns, and the old summary block."""
    msgs = [m.model_dump() for m in turns_to_messages(turns)]
    total = count_message_tokens(msgs, model) if msgs else 0
    return total + (count_tokens(render_summary(previous), model) if previous else 0)


# --- validation ------------------------------------------------------------------------


@dataclass
class SeenTokens:
    """Identifier values and ID-shaped tokens met anywhere in a ticket's turns up to `through`.

    Kept a turn at a time (and stored with each summary), so a compaction scans
    only the turns since the last one instead of the whole history.
    """

    through: int = 0
    ids: set[str] = field(default_factory=set)
    shaped: set[str] = field(default_factory=set)

    def add(self, turns) -> "SeenTokens":
        """Take in turns (oldest first); ones at or before `through` are already in."""
        for t in turns:
            if t.number <= self.through:
                continue
            text = f"{t.text}\n{json.dumps(t.payload, ensure_ascii=False, default=str)}"
            self.ids.update(v for _, v in find_ids(text))
            self.shaped.update(find_id_shaped(text))
            self.through = t.number
        return self

    def as_json(self) -> dict:
        return {"through": self.through, "ids": sorted(self.ids), "shaped": sorted(self.shaped)}

    @classmethod
    def from_json(cls, data: dict | None) -> "SeenTokens":
        data = data or {}
        return cls(
            through=int(data.get("through", 0)), ids=set(data.get("ids", ())), shaped=set(data.get("shaped", ()))
        )


@dataclass
class ValidationContext:
    """The facts an output is checked against; stored on the run so a replay checks the same."""

    ledger_values: list[str]
    roles: list[str]
    history_ids: list[str]  # known-format IDs anywhere in the ticket's history
    history_shaped: list[str]  # ID-shaped tokens anywhere in the ticket's history
    replaced_tokens: int
    covers_through_turn: int
    model: str  # tokenizer choice: the working model the summary is sent to
    # value → role for the ledger: a value the summariser wrote is replaced by its [role].
    ledger_roles: dict[str, str] = field(default_factory=dict)
    # Tools in the actions lane (what really happened) and tools staff approved; None: not checked.
    actions: list[str] | None = None
    # The domain whose declarations say what those tools do ("": the default domain).
    domain: str = ""
    # What each of those tools can do, when the class's tools are not its domain's (a class with tool
    # servers): tool → its declared capabilities. None: read them from `domain`.
    capabilities: dict[str, list[str]] | None = None
    # The customer's rules, what the turns brought up and what was done on what (`faithful.Lanes`,
    # as JSON); None: a run stored before this was checked.
    lanes: dict | None = None
    # Every tool the class offers → its capabilities: an "action taken" naming one must be in the lanes.
    tools: dict[str, list[str]] | None = None
    # Customer sentences the constraints must quote word for word (`required_quotes`); None: not checked.
    quotes: list[str] | None = None
    # Stems of the words the ticket's own text holds (`ticket_vocabulary`): an item that names nothing
    # else of the ticket must use one. None: a run stored before this was checked (its form alone is).
    vocabulary: list[str] | None = None

    def as_dict(self) -> dict:
        return self.__dict__.copy()

    @classmethod
    def from_dict(cls, d: dict) -> "ValidationContext":
        return cls(**d)


@dataclass
class Verdict:
    ok: bool
    # codes: schema, not_a_statement, id_value, invented_id, unsupported_claim, contradicts_customer,
    # ungrounded_decision, constraint_not_quoted, not_shorter
    reasons: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    fields: SummaryFields | None = None
    text: str = ""
    tokens: int = 0
    substituted: list[str] = field(default_factory=list)  # ledger values replaced by their [role]


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.M)


def decision_text(text: str) -> str:
    """What a reply decided: its sentences without pleasantries or questions ("" if none remain)."""
    kept = []
    for m in _SENTENCES.finditer(text or ""):
        sentence = m.group(0).strip()
        plain = re.sub(r"^turn \d+:\s*", "", sentence.replace("\u2019", "'"))
        if not sentence or sentence.endswith("?") or _PLEASANTRY.match(plain):
            continue
        kept.append(sentence)
    return " ".join(kept)


def parse_output(raw: str) -> SummaryFields:
    text = _FENCE.sub("", (raw or "").strip())
    start, end = text.find("{"), text.rfind("}")
    data = json.loads(text[start : end + 1] if start >= 0 and end > start else text)
    return SummaryFields.model_validate(data)


def _strings(f: SummaryFields) -> list[str]:
    return [*f.decisions, *f.actions_taken, *f.constraints_not_pinned, *f.open_questions, f.narrative]


def render_fields(f: SummaryFields) -> str:
    """The Summary.text body: narrative first, then the four required lists."""

    def section(title: str, items: list[str]) -> list[str]:
        return [title] + ([f"- {i.strip()}" for i in items] if items else ["- none"])

    return "\n".join(
        [f.narrative.strip()]
        + section("Decisions made:", f.decisions)
        + section("Actions taken (STATE holds the authoritative record):", f.actions_taken)
        + section("Customer constraints not yet pinned:", f.constraints_not_pinned)
        + section("Open questions:", f.open_questions)
    )


_ROLE_REF = re.compile(r"\[[A-Za-z0-9_ .-]+\]")


def validate(raw: str, ctx: ValidationContext) -> Verdict:
    try:
        fields = parse_output(raw)
    except ValidationError as exc:
        # Every error, field by field: the retry shows the model exactly what to fix.
        return Verdict(
            False,
            ["schema"],
            [f"{'.'.join(str(p) for p in e['loc']) or '(object)'}: {e['msg']}" for e in exc.errors()[:10]],
        )
    except ValueError as exc:
        return Verdict(False, ["schema"], [f"not a JSON object: {str(exc).splitlines()[0][:300]}"])
    # Pleasantries are not decisions, whoever wrote them: dropped, not a reason to reject.
    fields.decisions = [d for d in fields.decisions if decision_text(d)]
    substituted = substitute_roles(fields, ctx.ledger_roles)
    text = "\n".join(_strings(fields))
    reasons, details = [], []
    junk = not_statements(fields, ctx)
    if junk:
        reasons.append("not_a_statement")
        details.append(
            "items that are no statement about this ticket (write what was decided, done, asked or is still "
            "open, naming its [role], action or amount; use [] for an empty list): " + "; ".join(junk)
        )
    values = set(ctx.ledger_values) | set(ctx.history_ids)
    written = sorted(v for v in values if v and v in text)
    if written:
        reasons.append("id_value")
        details.append("identifier values written instead of [role]: " + ", ".join(written))
    # References to known roles are how entities must be named; they are not identifiers.
    roles = set(ctx.roles)
    bare = _ROLE_REF.sub(lambda m: " " if m.group(0)[1:-1] in roles else m.group(0), text)
    bare = AMOUNT_OR_DATE.sub(" ", bare)
    known = values | set(ctx.history_shaped)
    shaped = find_id_shaped(bare) | {v for _, v in find_ids(bare)}
    invented = sorted(t for t in shaped if t not in known)
    if invented:
        reasons.append("invented_id")
        details.append("ID-shaped tokens found nowhere in ledger or history: " + ", ".join(invented))
    if ctx.actions is not None:
        claims = unsupported_claims(fields, set(ctx.actions), get_domain(ctx.domain or None), ctx.capabilities)
        if ctx.lanes is not None:
            claims += faithful.actions_not_done(
                fields.actions_taken, faithful.Lanes.from_json(ctx.lanes), ctx.tools or {}
            )
        if claims:
            reasons.append("unsupported_claim")
            details.append("claims of actions the actions lane does not hold: " + "; ".join(claims))
    if ctx.lanes is not None:
        lanes = faithful.Lanes.from_json(ctx.lanes)
        # A required quote is the customer's own later word ("please cancel it now"), never the summary's.
        own = set(ctx.quotes or ())
        refused = faithful.contradictions(
            decisions=fields.decisions,
            actions_taken=fields.actions_taken,
            constraints=[c for c in fields.constraints_not_pinned if c not in own],
            lanes=lanes,
        )
        if refused:
            reasons.append("contradicts_customer")
            details.append("contradicts what the customer stated (rules in force): " + "; ".join(refused))
        nowhere = faithful.ungrounded(fields.decisions, lanes)
        if nowhere:
            reasons.append("ungrounded_decision")
            details.append("decisions no turn contains: " + "; ".join(nowhere))
    if ctx.quotes:
        held = {" ".join(c.split()) for c in fields.constraints_not_pinned}
        missing = [q for q in ctx.quotes if " ".join(q.split()) not in held]
        if missing:
            reasons.append("constraint_not_quoted")
            details.append(
                "constraints_not_pinned must hold these customer sentences word for word: "
                + "; ".join(f'"{q}"' for q in missing)
            )
    body = render_fields(fields)
    tokens = count_tokens(render_summary(SummaryData(ctx.covers_through_turn, body)), ctx.model)
    if tokens >= ctx.replaced_tokens:
        reasons.append("not_shorter")
        details.append(f"summary {tokens} tokens ≥ replaced {ctx.replaced_tokens}")
    return Verdict(not reasons, reasons, details, fields, body, tokens, substituted)


def not_statements(fields: SummaryFields, ctx: ValidationContext) -> list[str]:
    """Items (and the narrative) that are not statements about the ticket (`statements`): placeholders,
    the request's own words or errors said back, JSON fragments, single words, text naming nothing of
    it. A sentence the customer must be quoted in is their own word and is not judged."""
    own = {" ".join(q.split()) for q in ctx.quotes or ()}
    items = [
        *(("decisions", d) for d in fields.decisions),
        *(("actions_taken", a) for a in fields.actions_taken),
        *(("constraints_not_pinned", c) for c in fields.constraints_not_pinned if " ".join(c.split()) not in own),
        *(("open_questions", q) for q in fields.open_questions),
        ("narrative", fields.narrative),
    ]
    return statements.not_statements(
        items,
        roles=set(ctx.roles),
        tools=set(ctx.tools or ()) | set(ctx.actions or ()),
        vocab=set(ctx.vocabulary) if ctx.vocabulary is not None else None,
        amounts=AMOUNT_OR_DATE,
    )


def ticket_vocabulary(
    turns: list[TurnData], *, ledger: list[LedgerData], rules: list[RuleData], previous: SummaryData | None
) -> list[str]:
    """The stems of the words the summariser was given as the ticket: the turns (calls with their
    arguments, results), the ledger's roles and kinds, the rules and the summary before."""
    texts = [t.text for t in turns]
    for t in turns:  # a call's tool and the values it was given, not the keys of its JSON
        for call in (t.payload or {}).get("calls") or []:
            if isinstance(call, dict):
                args = call.get("arguments")
                values = args.values() if isinstance(args, dict) else ()
                texts.append(" ".join([str(call.get("name") or ""), *(str(v) for v in values)]))
    texts += [f"{e.role.replace('_', ' ')} {e.kind}" for e in ledger]
    texts += [r.text for r in rules] + ([previous.text] if previous else [])
    return sorted(statements.vocabulary(texts))


def substitute_roles(fields: SummaryFields, roles: dict[str, str]) -> list[str]:
    """Replace every ledger value written in the fields by its [role], in place; the values replaced."""
    done = []
    for value in sorted(roles, key=len, reverse=True):  # longer first: one value may contain another
        pattern = re.compile(rf"(?<![\w-]){re.escape(value)}(?![\w])")
        sub = lambda t: pattern.sub(f"[{roles[value]}]", t)  # noqa: E731
        before = _strings(fields)
        fields.decisions = [sub(t) for t in fields.decisions]
        fields.actions_taken = [sub(t) for t in fields.actions_taken]
        fields.constraints_not_pinned = [sub(t) for t in fields.constraints_not_pinned]
        fields.open_questions = [sub(t) for t in fields.open_questions]
        fields.narrative = sub(fields.narrative)
        if _strings(fields) != before:
            done.append(value)
    return done


# A claim that something was done, and the capability of the tool that would have done it
# (`tooling.domain.CAPABILITIES`). A sentence that negates or defers ("no refund yet", "refund
# requested", "held for approval") claims nothing.
CLAIMS = (
    (
        re.compile(
            r"\b(?:refunded|refund(?:ed)? (?:was |has been |is )?(?:issued|processed|made|completed|sent|given|provided)"
            r"|(?:issued|processed|made|gave|provided|completed|sent) (?:a |the |an? \w+ |their )?(?:partial |full )?refund)\b",
            re.I,
        ),
        "refunds",
        "a refund",
    ),
    (
        re.compile(r"\b(?:cancell?ed (?:the |their |his |her )?order|order (?:was |has been |is )?cancell?ed)\b", re.I),
        "cancels",
        "a cancellation",
    ),
    (
        re.compile(
            r"\b(?:booked (?:a |the )?return|return (?:was |has been |is )?(?:booked|created|arranged))\b", re.I
        ),
        "returns",
        "a return",
    ),
    (
        re.compile(
            r"\b(?:(?:sent|shipped|issued|arranged) (?:a |the )?replacement|replacement (?:was |has been )?(?:sent|shipped|arranged))\b",
            re.I,
        ),
        "replaces",
        "a replacement",
    ),
    (re.compile(r"\b(?:approved|approval (?:was |has been )?granted)\b", re.I), "*approval", "an approval"),
)
_NEGATED = re.compile(
    r"\b(?:no|not|never|without|n't|pending|requested|asks?|asked|wants?|wanted|awaiting|await|held|hold|"
    r"refused|declined|denied|if|whether|would|will|could|should|may|might|yet|unless|before)\b",
    re.I,
)


def unsupported_claims(
    fields: SummaryFields,
    actions: set[str],
    domain: Domain | None = None,
    capabilities: dict[str, list[str]] | None = None,
) -> list[str]:
    """Sentences claiming an action (refund, cancellation, return, replacement, approval) the actions lane lacks.

    `actions` holds the tools that ran; "*approval" is present when staff approved a held action.
    What each tool did is its declared capabilities: `capabilities[name]` when given, else in `domain`."""
    if capabilities is not None:
        done = {c for name in actions for c in capabilities.get(name, ())}
    else:
        domain = domain or get_domain()
        done = {c for name in actions if (t := domain.tool(name)) is not None for c in t.capabilities}
    done |= {name for name in actions if name.startswith("*")}
    found = []
    for text in [*fields.decisions, *fields.actions_taken, fields.narrative]:
        for m in _SENTENCES.finditer(text or ""):
            sentence = m.group(0).strip()
            if not sentence or _NEGATED.search(sentence):
                continue
            for pattern, capability, what in CLAIMS:
                if pattern.search(sentence) and capability not in done:
                    found.append(f'{what} ("{sentence[:120]}")')
    return found


# --- fallback --------------------------------------------------------------------------


def fallback_fields(
    turns: list[TurnData], *, from_turn: int, through_turn: int, failures: int, quotes: list[str] | None = None
) -> SummaryFields:
    """Deterministic trimming: say what was cut and which tools ran, and quote the customer's
    constraints (`required_quotes`) as a summary would. No IDs, no model."""
    counts: dict[str, int] = {}
    for t in turns:
        if t.kind == "tool_call":
            for c in (t.payload or {}).get("calls") or []:
                if isinstance(c, dict) and c.get("name"):
                    counts[str(c["name"])] = counts.get(str(c["name"]), 0) + 1
    tools = ", ".join(f"{name} ×{n}" for name, n in counts.items()) or "none"
    narrative = (
        f"Turns {from_turn}–{through_turn} were trimmed without a summary: the summariser failed "
        f"validation {failures} times. Tools called in them: {tools}. The rules, ledger and state "
        f"above are intact and authoritative; look anything else up again."
    )
    return SummaryFields(
        decisions=[],
        actions_taken=[f"{name} called {n}×" for name, n in counts.items()],
        constraints_not_pinned=list(quotes or []),
        open_questions=[],
        narrative=narrative,
    )
