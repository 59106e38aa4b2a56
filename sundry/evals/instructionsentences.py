"""A second, never-read set of customer sentences for scoring the constraint classifier.

The dev traces' customer sentences have all been read while the classifier was tuned, so no
half of them is unread any more. The τ²-bench task files hold the instructions each simulated
customer was given; the tasks that have no recorded trace in `corpora/tau2/traces` were never
read by anyone on this project. Their instruction sentences, turned into the customer's own voice
by a fixed pronoun swap ("You do not want …" → "I do not want …", "the agent" → "you"), are that
fresh set. The swap is mechanical on purpose: nobody here rewords them.

Each item has a stable id (domain, task id, sentence number) so that readers' label files name
sentences without quoting the corpus. `manage.py constraint_fresh` scores the classifier on them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from sundry.context.constraints import sentences
from sundry.evals import sources

# Fields of a task's instructions that the simulated customer speaks from, in this order.
FIELDS = ("reason_for_call", "task_instructions", "unknown_info")
DOMAINS = ("airline", "retail")

# "you" is the customer's "me" only after a preposition or a verb that takes an object; else "I".
_OBJECT_BEFORE = re.compile(
    r"\b(?:to|for|with|at|from|about|by|of|on|into|than|like|ask|asks|asked|tell|tells|told|give|gives|"
    r"gave|offer|offers|offered|let|lets|help|helps|send|sends|sent|show|shows|call|calls|charge|"
    r"charges|transfer|transfers|remind|reminds|provide|provides|convince|convinces|inform|informs|"
    r"pay|pays|refund|refunds|book|books|get|gets|make|makes|want|wants|need|needs|allow|allows|"
    r"cost|costs|put|puts|connect|connects|assist|assists|thank|thanks)\s+$",
    re.IGNORECASE,
)
_CONTRACTIONS = {
    "you're": "I'm",
    "you've": "I've",
    "you'll": "I'll",
    "you'd": "I'd",
    "you are": "I am",
    "you were": "I was",
    "yourself": "myself",
    "yours": "mine",
    "your": "my",
}
_AGENT = {
    "the agent's": "your",
    "the agent is": "you are",
    "the agent was": "you were",
    "the agent has": "you have",
    "the agent does": "you do",
}


@dataclass(frozen=True)
class Sentence:
    id: str
    text: str


def first_person(text: str) -> str:
    """`text` as the customer would say it: second person to first, the agent to "you"."""
    text = text.replace("’", "'")
    for said, mine in _CONTRACTIONS.items():
        text = re.sub(rf"\b{said}\b", lambda m, mine=mine: _cased(m.group(0), mine), text, flags=re.IGNORECASE)
    out, last = [], 0
    for m in re.finditer(r"\byou\b", text, flags=re.IGNORECASE):
        before = text[last : m.start()]
        out.append(before)
        obj = _OBJECT_BEFORE.search("".join(out)[-40:]) is not None
        out.append("me" if obj else "I")
        last = m.end()
    out.append(text[last:])
    text = "".join(out)
    # The agent becomes "you" only after the customer's "you" became "I".
    for said, yours in _AGENT.items():
        text = re.sub(rf"\b{said}\b", lambda m, yours=yours: _cased(m.group(0), yours), text, flags=re.IGNORECASE)
    text = re.sub(
        r"\b(the agent)\s+(\w+?)s\b",
        lambda m: _cased(m.group(1), "you") + " " + m.group(2),
        text,
        flags=re.IGNORECASE,
    )
    return re.sub(r"\bthe agent\b", lambda m: _cased(m.group(0), "you"), text, flags=re.IGNORECASE)


def _cased(said: str, new: str) -> str:
    return new[0].upper() + new[1:] if said[:1].isupper() else new


def traced_task_ids(traces: Path) -> dict[str, set[str]]:
    """Per domain, the task ids that have a recorded trace (these sentences were read)."""
    out: dict[str, set[str]] = {d: set() for d in DOMAINS}
    for path in sorted(traces.glob("*.json")):
        domain = next((d for d in DOMAINS if f"_{d}_" in path.name), None)
        if domain:
            out[domain] |= {str(s["task_id"]) for s in json.loads(path.read_text())["simulations"]}
    return out


def fresh_sentences(corpora: Path | None = None) -> list[Sentence]:
    """Every instruction sentence of the untraced airline and retail tasks, in the customer's voice."""
    corpora = corpora or _corpora()
    traced = traced_task_ids(corpora / "traces")
    items = []
    for domain in DOMAINS:
        for task in json.loads((corpora / "domains" / domain / "tasks.json").read_text()):
            if str(task["id"]) in traced[domain]:
                continue
            said = (task.get("user_scenario") or {}).get("instructions") or {}
            n = 0
            for field in FIELDS:
                for sentence in sentences(said.get(field) or ""):
                    if not re.search(r"[A-Za-z]{2}", sentence):
                        continue  # a stray "." is no sentence
                    n += 1
                    items.append(Sentence(f"{domain}-{task['id']}-{n}", first_person(sentence)))
    return items


def _corpora() -> Path:
    shared = sources.shared_dir()
    if shared is None or not (shared / "corpora" / "tau2" / "domains").is_dir():
        raise FileNotFoundError("the τ²-bench corpora (../shared/corpora/tau2) are not beside this checkout")
    return shared / "corpora" / "tau2"
