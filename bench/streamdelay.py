"""How much later a streamed reply's first words show when text is released a sentence at a time.

Benchmark, not a test: `python -m bench.streamdelay [τ²-bench results files…]`
(default: the recorded conversations beside the project). For every agent
reply in the recordings, the characters the model must write before anything
shows — up to the first complete word (release word by word) and up to the
first complete sentence (`agent.provisional`, what Sundry does) — and those
characters as seconds at the streaming rates given (characters per second:
about 4 per token). Prints the figures as JSON.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

from sundry.agent.guards import provisional
from sundry.evals.importers import tau2_results

DEFAULT = Path(__file__).resolve().parents[2].parent / "shared" / "corpora" / "tau2" / "traces"
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


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted(DEFAULT.glob("*.json"))
    if not paths:
        print(f"no recordings found (looked in {DEFAULT}); name τ²-bench results files", file=sys.stderr)
        return 2
    print(json.dumps(measure(paths), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
