"""The done-claims check on replies nobody here wrote: τ²-bench's recorded agent replies.

Benchmark, not a test: `python -m sundry.evals.claimsbench [results files…]` (default: the
recordings beside the project). Each agent reply is judged as the reply check would judge it
(`agent.replyclaims`) against the writes that had succeeded on that conversation before it,
and the statuses its lookups reported, by the domain's production declarations. Prints how many replies state something done, how many
of those the records back, and the unbacked ones for a person to read: each is either a false
claim the check rightly stops, or a wording it misreads.

Control: the same replies judged against no records at all — every claim is then unbacked, so
the figure is the check's, not an artefact of the recordings.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

DEFAULT = Path(__file__).resolve().parents[2].parent / "shared" / "corpora" / "tau2" / "traces"


def judge(ticket) -> list[dict]:
    from sundry.agent import replyclaims
    from sundry.context.lanes import ActionData, LedgerData
    from sundry.evals.domains import DOMAINS

    domain = DOMAINS[ticket.domain].domain
    kinds = replyclaims.kinds_of(domain.tools)
    calls, actions, ledger, out = {}, [], {}, []
    for t in ticket.turns:
        p = t.payload or {}
        if t.kind == "tool_call":
            for c in p.get("calls") or []:
                calls[str(c.get("id"))] = c
        elif t.kind == "tool_result" and p.get("ok", True):
            c = calls.get(str(p.get("call_id")))
            # What the result says each record is ("… · cancelled"), as the live ledger keeps it.
            for value, text in (domain.descriptions(c.get("name", ""), t.text) if c else {}).items():
                ledger[value] = LedgerData(role="", value=value, kind=domain.kind_of(value) or "id", verified=True,
                                           first_seen_turn=t.number, last_used_turn=t.number, description=text)
            if c and c.get("name") in kinds:
                args = c.get("arguments") or {}
                values = tuple(str(v) for v in (args.values() if isinstance(args, dict) else ())
                               if isinstance(v, (str, int)))
                actions.append(ActionData(tool=c["name"], target=values[0] if values else "", turn=t.number,
                                          idempotency_key=str(c.get("id")), reversible=True, on=values))
        elif t.author == "agent" and t.kind == "message" and t.text.strip():
            claims = replyclaims.claims_in(t.text)
            if not claims:
                continue
            records = {"records": (list(actions), list(ledger.values())), "control: no records": ([], [])}
            verdicts = {name: replyclaims.unsupported(t.text, actions=acts, ledger=entries, kinds=kinds,
                                                      owner_kind=domain.owner_kind)
                        for name, (acts, entries) in records.items()}
            out.append({"ticket": ticket.id, "turn": t.number, "kinds": sorted({c.kind for c in claims}),
                        "judged": any(c.kind in set().union(*kinds.values()) for c in claims),
                        "unbacked": [c.sentence for c in verdicts["records"]],
                        "unbacked_control": len(verdicts["control: no records"])})
    return out


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
    unbacked = [r for r in judged if r["unbacked"]]
    print(json.dumps({
        "replies": replies, "replies_stating_something_done": len(rows),
        "of_kinds_the_domain_declares": len(judged), "backed_by_the_records": len(judged) - len(unbacked),
        "unbacked": len(unbacked), "control_unbacked_with_no_records": sum(bool(r["unbacked_control"]) for r in judged),
        "unbacked_replies": [{"ticket": r["ticket"], "turn": r["turn"], "sentences": r["unbacked"]} for r in unbacked],
    }, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
