"""The done-claims check on replies nobody here wrote: τ²-bench's recorded agent replies.

Benchmark, not a test: `python -m bench.claimsbench [results files…]` (default: the
recordings beside the project). Each agent reply is judged as the reply check would judge it
(`agent.replyclaims`: done, pending, promised, refused and denied actions) against the writes
that had succeeded on that conversation before it, the statuses its lookups reported, and — for
the cards Sundry would have shown — the writes made after the customer's next answer (`_cards`),
by the domain's production declarations. Prints how many replies speak of an action, in which
mode, how many the records back, and the unbacked ones for a person to read: each is either a
false claim the check rightly stops, or a wording it misreads.

Controls: the same replies judged without the cards (promises awaiting a yes are then unbacked),
and against no records at all (every claim is then unbacked), so the figure is the check's, not
an artefact of the recordings.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "tau2" / "traces"


def _write(c: dict, kinds) -> tuple[str, tuple[str, ...]] | None:
    """(tool, the plain values its arguments name) of a call of a tool that performs an action."""
    if not c or c.get("name") not in kinds:
        return None
    args = c.get("arguments") or {}
    return c["name"], tuple(
        str(v) for v in (args.values() if isinstance(args, dict) else ()) if isinstance(v, (str, int))
    )


def judge(ticket) -> list[dict]:
    from sundry.agent.guards import replyclaims
    from sundry.agent.guards.provisional import sentences
    from sundry.context.lanes import ActionData, LedgerData
    from sundry.evals.domains import DOMAINS

    domain = DOMAINS[ticket.domain].domain
    kinds = replyclaims.kinds_of(domain.tools)
    later = replyclaims.later_kinds_of(domain.tools)
    vocab = replyclaims.vocabulary_of(domain.tools)
    entity = {"targets": replyclaims.targets_of(domain.tools), "kind_of": domain.kind_of}
    turns = list(ticket.turns)
    calls, actions, ledger, out, question = {}, [], {}, [], ""
    for i, t in enumerate(turns):
        p = t.payload or {}
        if t.kind == "tool_call":
            for c in p.get("calls") or []:
                calls[str(c.get("id"))] = c
        elif t.kind == "tool_result" and p.get("ok", True):
            c = calls.get(str(p.get("call_id")))
            # What the result says each record is ("… · cancelled"), as the live ledger keeps it.
            for value, text in (domain.descriptions(c.get("name", ""), t.text) if c else {}).items():
                ledger[value] = LedgerData(
                    role="",
                    value=value,
                    kind=domain.kind_of(value) or "id",
                    verified=True,
                    first_seen_turn=t.number,
                    last_used_turn=t.number,
                    description=text,
                )
            if (w := _write(c, later)) is not None:
                actions.append(
                    ActionData(
                        tool=w[0],
                        target=w[1][0] if w[1] else "",
                        turn=t.number,
                        idempotency_key=str(c.get("id")),
                        reversible=True,
                        on=w[1],
                    )
                )
        elif t.author == "customer" and t.kind == "message":
            question = t.text  # what a bare yes or no in the next reply answers
        elif t.author == "agent" and t.kind == "message" and t.text.strip():
            claims = replyclaims.claims_of(t.text, question, vocab)
            if not claims:
                continue
            cards = _cards(turns[i + 1 :], later)
            records = {
                "records": (list(actions), list(ledger.values()), cards),
                "control: cards until the next reply": (
                    list(actions),
                    list(ledger.values()),
                    _cards(turns[i + 1 :], later, strict=True),
                ),
                "control: no cards": (list(actions), list(ledger.values()), ()),
                "control: no records": ([], [], ()),
            }
            verdicts = {
                name: replyclaims.unsupported(
                    t.text,
                    actions=acts,
                    ledger=entries,
                    kinds=kinds,
                    owner_kind=domain.owner_kind,
                    proposals=props,
                    later=later,
                    question=question,
                    vocab=vocab,
                    **entity,
                )
                for name, (acts, entries, props) in records.items()
            }
            # What judging costs: the whole reply once (the stored reply's check), and the stream's way —
            # the text up to each sentence's end, each prefix once, its last sentence judged
            # with the earlier ones as what it may speak of (`answer.sentence_passes`).
            acts, entries, props = records["records"]
            said = sentences(t.text, final=True)
            started = time.perf_counter()
            replyclaims.unsupported(
                t.text,
                actions=acts,
                ledger=entries,
                kinds=kinds,
                owner_kind=domain.owner_kind,
                proposals=props,
                later=later,
                question=question,
                vocab=vocab,
                **entity,
            )
            whole = time.perf_counter() - started
            started = time.perf_counter()
            for n in range(1, len(said) + 1):
                replyclaims.unsupported(
                    "".join(said[:n]),
                    actions=acts,
                    ledger=entries,
                    kinds=kinds,
                    owner_kind=domain.owner_kind,
                    proposals=props,
                    later=later,
                    question=question,
                    vocab=vocab,
                    since=n - 1,
                    **entity,
                )
            streamed = time.perf_counter() - started
            declared = set().union(*later.values())
            out.append(
                {
                    "ticket": ticket.id,
                    "turn": t.number,
                    "modes": sorted({c.mode for c in claims}),
                    "kinds": sorted({c.kind for c in claims}),
                    "judged": any(c.kind in declared or c.kind in (replyclaims.ANY, replyclaims.READY) for c in claims),
                    "judged_modes": sorted(
                        {c.mode for c in claims if c.kind in declared or c.kind in (replyclaims.ANY, replyclaims.READY)}
                    ),
                    "unbacked": [(c.mode, c.sentence) for c in verdicts["records"]],
                    "unbacked_no_cards": [(c.mode, c.sentence) for c in verdicts["control: no cards"]],
                    "unbacked_strict": [(c.mode, c.sentence) for c in verdicts["control: cards until the next reply"]],
                    "unbacked_control": len(verdicts["control: no records"]),
                    "sentences": len(said),
                    "seconds_whole": whole,
                    "seconds_streamed": streamed,
                }
            )
    return out


def _cards(after, kinds, *, strict: bool = False) -> tuple:
    """The writes the recorded agent made after this reply (`strict`: before its next one). τ²-bench's
    agents ask for a yes in words and make the call once they have it, often a message or two later;
    Sundry's make the call first and the customer confirms its card. So a call that followed stands
    for the card that would have been open while this reply was read: the promise was kept."""
    from sundry.agent.guards.replyclaims import OPEN, Proposal

    out = []
    for t in after:
        if strict and t.author == "agent" and t.kind == "message":
            break
        if t.kind == "tool_call":
            out += [
                Proposal(w[0], w[1], OPEN)
                for c in (t.payload or {}).get("calls") or []
                if (w := _write(c, kinds)) is not None
            ]
    return tuple(out)


def main(argv: list[str]) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sundry.settings")
    import django

    django.setup()
    from sundry.evals.importers import tau2_results

    paths = [Path(a) for a in argv] or sorted(DEFAULT.glob("*.json"))
    if not paths:
        print(f"no recordings found (looked in {DEFAULT}); name τ²-bench results files", file=sys.stderr)
        return 2
    tickets = [t for p in paths for t in tau2_results(p)]
    replies = sum(1 for t in tickets for turn in t.turns if turn.author == "agent" and turn.kind == "message")
    rows = [r for t in tickets for r in judge(t)]
    judged = [r for r in rows if r["judged"]]
    sentences = max(1, sum(r["sentences"] for r in rows))
    unbacked = [r for r in judged if r["unbacked"]]
    done_only = [r for r in judged if any(mode == "done" for mode, _s in r["unbacked"])]
    modes = {
        m: sum(m in r["judged_modes"] for r in judged)
        for m in ("done", "pending", "future", "refused", "denied", "offer")
    }
    print(
        json.dumps(
            {
                "replies": replies,
                "replies_speaking_of_an_action": len(rows),
                "of_kinds_the_domain_declares": len(judged),
                "replies_per_mode": modes,
                "backed_by_the_records": len(judged) - len(unbacked),
                "unbacked": len(unbacked),
                "unbacked_by_done_claims_alone": len(done_only),
                "control_unbacked_without_cards": sum(bool(r["unbacked_no_cards"]) for r in judged),
                "control_unbacked_cards_until_the_next_reply": sum(bool(r["unbacked_strict"]) for r in judged),
                "control_unbacked_with_no_records": sum(bool(r["unbacked_control"]) for r in judged),
                # Per sentence of the replies that speak of an action: the stored reply's check, and the
                # stream's (each prefix up to a sentence's end judged once).
                "microseconds_per_sentence_whole": round(1e6 * sum(r["seconds_whole"] for r in rows) / sentences, 1),
                "microseconds_per_sentence_streamed": round(
                    1e6 * sum(r["seconds_streamed"] for r in rows) / sentences, 1
                ),
                "unbacked_replies": [
                    {"ticket": r["ticket"], "turn": r["turn"], "sentences": r["unbacked"]} for r in unbacked
                ],
            },
            indent=2,
            ensure_ascii=False,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
