"""Whether a summary's decisions, actions and constraints agree with the lanes and the customer.

Pure. What a summary says is read a clause at a time for the actions it is *for* or *against*
(capabilities, `tooling.domain.CAPABILITIES`), and those are compared with what code keeps:
the rules the customer stated (pinned or candidate), the actions lane with each action's
target, and the calls and offers the summarised turns contain. Reading is by clause, not by
the summary's exact words, so a refusal ("no replacement", "declined a replacement", "a refund
instead of a replacement") is never taken for a decision for the thing refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# How an action is named in prose, per capability. Domain-free: the capabilities are fixed.
MENTIONS: dict[str, re.Pattern] = {
    "replaces": re.compile(r"\breplac\w*|\bexchang\w*|\bswap\w*|\bnew one\b", re.I),
    "refunds": re.compile(r"\brefund\w*|\bmoney back\b|\breimburs\w*", re.I),
    "cancels": re.compile(r"\bcancel\w*", re.I),
    "returns": re.compile(r"\breturn(?:s|ed|ing)?\b|\bsend (?:it|them) back\b", re.I),
    "contacts_customer:email": re.compile(r"\be-?mail\w*", re.I),
    "contacts_customer:phone": re.compile(
        r"\bphone (?:call|them|him|her|the customer)\b|\bphoned\b|\bring (?:them|him|her)\b", re.I
    ),
}
WHAT = {
    "replaces": "a replacement",
    "refunds": "a refund",
    "cancels": "a cancellation",
    "returns": "a return",
    "contacts_customer:email": "an e-mail",
    "contacts_customer:phone": "a phone call",
}

# A clause against its action: refused, ruled out, not wanted. ("n't" has no word boundary before it.)
_AGAINST = re.compile(
    r"\b(?:no|not|never|none|nor|without|refus\w*|declin\w*|reject\w*|den(?:y|ied|ies)|turned down|turns down|"
    r"ruled? out|rules out|against|except|cannot|unable|instead of|rather than|other than|apart from)\b|n't\b",
    re.I,
)
# A clause that only asks or waits: for a list of things *done*, it claims nothing.
_NOT_DONE = re.compile(
    r"\b(?:pending|requested|asks?|asked|awaiting|await|held|hold|if|whether|would|will|could|"
    r"should|may|might|yet|unless|before|offered|proposed|suggested)\b",
    re.I,
)
_CLAUSES = re.compile(r"[;!?\n]+|[.,](?=\s|$)|\b(?:and|but|while|whereas|although|though)\b", re.I)
_CONTRAST = re.compile(r"\b(?:instead of|rather than|other than|apart from|except)\b", re.I)
_ROLE = re.compile(r"\[([A-Za-z0-9_ .-]+)\]")


def clauses(text: str) -> list[tuple[str, bool]]:
    """(clause, against) for each clause of `text`; what follows "instead of" is against."""
    text = (text or "").replace("\u2019", "'").replace("anything but", "anything except")
    out = []
    for part in _CLAUSES.split(text):
        part = part.strip()
        if not part:
            continue
        head, *rest = _CONTRAST.split(part, maxsplit=1)
        out.append((head, bool(_AGAINST.search(head))))
        out.extend((r, True) for r in rest if r.strip())
    return out


def reading(text: str) -> tuple[set[str], set[str]]:
    """(capabilities `text` is for, capabilities it is against)."""
    for_, against = set(), set()
    for clause, neg in clauses(text):
        for capability, pattern in MENTIONS.items():
            if pattern.search(clause):
                (against if neg else for_).add(capability)
    return for_, against


@dataclass
class Refusal:
    """A rule the customer stated that forbids `capabilities` (on `only_on` roles alone, if any)."""

    rule: str
    capabilities: list[str]
    only_on: list[str] = field(default_factory=list)


@dataclass
class Lanes:
    """What the summary is judged against, as plain data (kept on the run's validation context)."""

    refusals: list[Refusal]
    # Capabilities the summarised turns (or the summary before) bring up: a call made (run, held or
    # refused), or a clause for it in anyone's words. A decision for anything else is no turn's.
    raised: set[str]
    # Capabilities done, each with the targets (ledger roles, "" when the target has none) it was done on.
    done: dict[str, set[str]]
    roles_of_kind: dict[str, str] = field(default_factory=dict)  # role → ledger kind

    def as_json(self) -> dict:
        return {
            "refusals": [r.__dict__ for r in self.refusals],
            "raised": sorted(self.raised),
            "done": {c: sorted(t) for c, t in self.done.items()},
            "roles_of_kind": self.roles_of_kind,
        }

    @classmethod
    def from_json(cls, d: dict) -> "Lanes":
        return cls(
            [Refusal(**r) for r in d.get("refusals", ())],
            set(d.get("raised", ())),
            {c: set(t) for c, t in d.get("done", {}).items()},
            dict(d.get("roles_of_kind", {})),
        )


def raised_in(texts: list[str], called: set[str]) -> set[str]:
    """Capabilities brought up: by a call made (its tool's capabilities, `called`) or a clause for them."""
    out = set(called)
    for text in texts:
        out |= reading(text)[0]
    return out


def _roles(text: str) -> set[str]:
    return {m.group(1) for m in _ROLE.finditer(text or "")}


def contradictions(
    *, decisions: list[str], actions_taken: list[str], constraints: list[str], lanes: Lanes
) -> list[str]:
    """Clauses for an action a rule of the customer's forbids."""
    found = []
    for label, items in (("decision", decisions), ("action taken", actions_taken), ("constraint", constraints)):
        for item in items:
            wanted, _ = reading(item)
            named = _roles(item)
            for r in lanes.refusals:
                # Done all the same (staff's call): the record is true, whatever the rule says.
                hit = sorted(
                    c
                    for c in (wanted & set(r.capabilities)) - set(lanes.done)
                    if not r.only_on or not named or named & set(r.only_on)
                )
                if hit:
                    found.append(
                        f'{label} "{item[:120]}" is for {WHAT[hit[0]]}, which the customer refused: "{r.rule[:120]}"'
                    )
    return found


def ungrounded(decisions: list[str], lanes: Lanes) -> list[str]:
    """Decisions for an action no summarised turn (nor the summary before) brings up."""
    found = []
    for item in decisions:
        wanted, _ = reading(item)
        missing = sorted(wanted - lanes.raised - set(lanes.done))
        if missing:
            found.append(f'decision "{item[:120]}" is for {WHAT[missing[0]]}, which no turn offered, asked for or made')
    return found


def actions_not_done(actions_taken: list[str], lanes: Lanes, tools: dict[str, list[str]]) -> list[str]:
    """Entries of "actions taken" that the actions lane does not hold: a tool named that never ran, an
    action of a kind never done, or one done only on another entity than the entry names."""
    found = []
    for item in actions_taken:
        claimed: set[str] = set()
        for clause, neg in clauses(item):
            if neg or _NOT_DONE.search(clause):
                continue
            claimed |= {c for c, p in MENTIONS.items() if p.search(clause)}
            for name, caps in tools.items():
                if re.search(rf"\b{re.escape(name)}\b", clause):
                    claimed |= set(caps) or {f"tool:{name}"}
        named = _roles(item)
        for c in sorted(claimed):
            if c.startswith("tool:"):
                continue  # a lookup: nothing to check it against
            targets = lanes.done.get(c)
            if targets is None:
                found.append(f'action taken "{item[:120]}": the actions lane holds no such action ({WHAT[c]})')
                continue
            kinds = {lanes.roles_of_kind.get(t) for t in targets if t}
            on = {n for n in named if lanes.roles_of_kind.get(n) in kinds}
            if on and not on & targets:
                found.append(
                    f'action taken "{item[:120]}": {WHAT[c]} was done on '
                    f"{', '.join(f'[{t}]' for t in sorted(targets) if t)}, not {', '.join(f'[{n}]' for n in sorted(on))}"
                )
    return found
