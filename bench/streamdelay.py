"""How much later a streamed reply's first words show when text is released a sentence at a time.

Benchmark, not a test: `python -m bench.streamdelay [τ²-bench results files…]`
(default: the recorded conversations beside the project). For every agent
reply in the recordings, the characters the model must write before anything
shows — up to the first complete word (release word by word) and up to the
first complete sentence (`agent.provisional`, what Sundry does) — and those
characters as seconds at the streaming rates given (characters per second:
about 4 per token). Prints the figures as JSON.

`--check` also replays each reply as the stream receives it (a token of 4
characters at a time, each prefix judged once, as `ReplyStream` caches it) with
the judge a step gives the stream, timed on this machine: `claims` (the claims
and internal-text check alone, the stream before `answer.KEEP_SHOWN`) and
`whole` (the same plus the whole reply check on every prefix, what a step does
now). The two alternate reply by reply, so a load change hits both alike. The
records each reply is judged against are its domain's declarations with empty
lanes, its known identifiers those of every earlier non-agent turn.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import time
from pathlib import Path

from sundry.agent.guards import provisional
from sundry.evals.importers import tau2_results

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "tau2" / "traces"
RATES = {"hosted model, ~40 tokens/s": 160.0, "small model on a CPU, ~8 tokens/s": 32.0}


def first_word(text: str) -> int:
    m = re.search(r"\S+\s", text)
    return m.end() if m else len(text)


def first_sentence(text: str) -> int:
    done = provisional.sentences(text, final=False)
    return len(done[0]) if done else len(text)  # no sentence end before the reply is finished: all of it


def measure(paths: list[Path]) -> dict:
    replies = [
        t.text
        for p in paths
        for ticket in tau2_results(p)
        for t in ticket.turns
        if t.author == "agent" and t.kind == "message" and t.text.strip()
    ]
    words = [first_word(r) for r in replies]
    sentences = [first_sentence(r) for r in replies]
    extra = [s - w for s, w in zip(sentences, words)]
    whole = sum(1 for r, s in zip(replies, sentences) if s >= len(r.rstrip()))

    def q(values, p):
        return round(statistics.quantiles(values, n=100)[p - 1], 1) if len(values) > 1 else float(values[0])

    out = {
        "replies": len(replies),
        "files": [p.name for p in paths],
        "chars_before_first_visible": {
            "word_by_word": {"median": statistics.median(words), "p90": q(words, 90)},
            "sentence_by_sentence": {"median": statistics.median(sentences), "p90": q(sentences, 90)},
        },
        "added_chars": {"median": statistics.median(extra), "p90": q(extra, 90)},
        "replies_whose_first_sentence_is_the_whole_reply": whole,
        "added_delay_seconds": {
            name: {"median": round(statistics.median(extra) / rate, 2), "p90": round(q(extra, 90) / rate, 2)}
            for name, rate in RATES.items()
        },
    }
    return out


TOKEN_CHARS = 4


def _judges(ticket, before, reply_text):
    """The stream's sentence judges for one recorded reply: (known, {mode: judge})."""
    from sundry.agent import answer
    from sundry.agent.guards import replycheck, replyclaims
    from sundry.evals.domains import DOMAINS

    domain = DOMAINS[ticket.domain].domain
    facts = replyclaims.Records.of(domain)
    tools = set(domain.tools)
    known = replycheck.known_identifiers([t.text for t in before if t.author != "agent" and t.text])
    question = next((t.text for t in reversed(before) if t.author == "customer" and t.kind == "message"), "")

    def posts_as_is(upto):
        verdict = replycheck.check_reply(upto, known=known, tools=tools, customer_said=question)
        return verdict.action == replycheck.POST and answer._plain(verdict.text) == answer._plain(upto)

    return known, {
        "claims": lambda upto: answer.sentence_passes(upto, facts, None, question),
        "whole": lambda upto: answer.sentence_passes(upto, facts, None, question, posts_as_is),
    }


def _replay(text, known, judge):
    """(chars written before the first words showed or None, seconds judging until then, seconds judging
    in all) for `text` streamed a token at a time, each prefix judged once."""
    judged: dict[str, bool] = {}
    spent = [0.0]

    def ok(upto):
        if upto not in judged:
            t0 = time.perf_counter()
            judged[upto] = judge(upto)
            spent[0] += time.perf_counter() - t0
        return judged[upto]

    first, first_spent = None, 0.0
    for end in [*range(TOKEN_CHARS, len(text), TOKEN_CHARS), len(text)]:
        final = end == len(text)
        if provisional.shown(text[:end], known=known, final=final, sentence_ok=ok).strip() and first is None:
            first, first_spent = end, spent[0]
    return first, first_spent, spent[0]


def check_cost(paths: list[Path], limit: int | None = None) -> dict:
    """The judge's time per reply, old (`claims`) and new (`whole`) alternating, and what each lets show."""
    items = []
    for p in paths:
        for ticket in tau2_results(p):
            turns = list(ticket.turns)
            for i, t in enumerate(turns):
                if t.author == "agent" and t.kind == "message" and t.text.strip():
                    items.append((ticket, turns[:i], t.text))
    items = items[:limit] if limit else items
    got: dict[str, dict[str, list]] = {
        m: {"first": [], "first_ms": [], "all_ms": [], "never": []} for m in ("claims", "whole")
    }
    for n, (ticket, before, text) in enumerate(items):
        known, judges = _judges(ticket, before, text)
        order = ("claims", "whole") if n % 2 == 0 else ("whole", "claims")
        for mode in order:
            first, first_s, all_s = _replay(text, known, judges[mode])
            g = got[mode]
            g["never"].append(first is None)
            if first is not None:
                g["first"].append(first)
                g["first_ms"].append(first_s * 1000)
            g["all_ms"].append(all_s * 1000)

    def q(values, p):
        return round(statistics.quantiles(values, n=100)[p - 1], 2) if len(values) > 1 else float(values[0])

    return {
        "replies": len(items),
        **{
            mode: {
                "replies_showing_nothing_before_the_end": sum(g["never"]),
                "chars_before_first_visible": {"median": statistics.median(g["first"]), "p90": q(g["first"], 90)},
                "judge_ms_before_first_visible": {
                    "median": round(statistics.median(g["first_ms"]), 2),
                    "p90": q(g["first_ms"], 90),
                    "max": round(max(g["first_ms"]), 2),
                },
                "judge_ms_whole_reply": {
                    "median": round(statistics.median(g["all_ms"]), 2),
                    "p90": q(g["all_ms"], 90),
                    "max": round(max(g["all_ms"]), 2),
                },
            }
            for mode, g in got.items()
        },
    }


def main(argv: list[str]) -> int:
    check = "--check" in argv
    argv = [a for a in argv if a != "--check"]
    paths = [Path(a) for a in argv] or sorted(DEFAULT.glob("*.json"))
    if not paths:
        print(f"no recordings found (looked in {DEFAULT}); name τ²-bench results files", file=sys.stderr)
        return 2
    out = measure(paths)
    if check:
        import os

        import django

        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sundry.settings")
        django.setup()
        out["check"] = check_cost(paths)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
