"""Spotting rules in what people type, and turning rule text into checks.

A cheap classifier pass, not a model: it flags imperative and negative
phrasing as *candidates*. A candidate is enforced at once (fail-safe: a
flagged "never email" blocks every tool the domain declares with the
capability `contacts_customer:email` before anyone confirms it) and shown as
unconfirmed until staff confirm or dismiss it. Who may change a rule goes by
authority: staff > customer-stated > model (`plan_pin`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sundry.tooling.domain import Domain, get_domain

# A directive, not a description: "don't"/"never" opening a clause ("Please
# don't call", "…, never email") or aimed at something the desk could do;
# "they don't fit" and "it never arrived" are not rules.
_ACTIONS = (
    r"(?:e-?mail|call|phone|ring|text|sms|contact|send|cancel|refund|ship|deliver|offer|replace|"
    r"exchange|charge|bill|share|give|leave|post|close|change|use)"
)
_TRIGGERS = re.compile(
    r"(?:^|[,;:(]\s*|\b(?:please|and|but|so|just|also)\s+)(?:don'?t|do not|never)\b"
    rf"|\b(?:don'?t|do not|never)\s+(?:ever\s+)?{_ACTIONS}"
    r"|\bwhatever you do\b|\bi (?:don'?t|do not) want\b|\bmust not\b|\bmustn'?t\b|\bno more\b"
    r"|\bstop (?:sending|calling|emailing)\b|\bnot (?:by|via) (?:email|e-mail|phone|text)\b"
    r"|\b(?:phone|e-?mail|text|sms|calls?|post|chat)\s+only\b|\bonly\s+(?:by|via|over|through|call|phone|e-?mail|text|contact|refund|to)\b"
    r"|\bno (?:replacements?|e-?mails?|calls?|store credit|refund|exchange|insurance|bags|need to)\b"
    r"|\bi only want\b|\bonly want (?:to|the|a|an|early|late)\b|\bthe only \w+(?: \w+)? i want\b"
    r"|\bnothing else\b"
    r"|\bonly\s+(?:check|answer|pick up|read|look at|available)\b[^.]{0,40}\b(?:after|before|between|until|from)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")


def candidate_rules(text: str) -> list[str]:
    """Sentences of `text` whose phrasing looks like a rule, verbatim and in order."""
    out = []
    for match in _SENTENCE.finditer(text or ""):
        sentence = match.group(0).strip()
        # Match on straight apostrophes; keep the customer's own characters in the rule.
        if len(sentence) >= 4 and _TRIGGERS.search(sentence.replace("\u2019", "'")):
            out.append(sentence)
    return out


_NEG = r"(?:don'?t|do not|never|no|not|stop|without|only)"
EMAIL, PHONE = "contacts_customer:email", "contacts_customer:phone"
# (pattern over the rule text, capability it forbids; see tooling.domain.CAPABILITIES). Patterns
# are deliberately narrow: a structured check that misfires would block legitimate work.
_CHECKS: list[tuple[re.Pattern, str]] = [
    (
        re.compile(
            rf"\b{_NEG}\b[^.]*\b(e-?mails?|emailing)\b|\b(phone|call|calls|text)\s+only\b|\bonly\s+(by\s+)?(phone|call)",
            re.I,
        ),
        EMAIL,
    ),
    (
        re.compile(
            rf"\b{_NEG}\b[^.]*\b(phone|call|calls|calling)\b|\b(e-?mail)\s+only\b|\bonly\s+(by\s+)?e-?mail", re.I
        ),
        PHONE,
    ),
    (re.compile(rf"\b{_NEG}\b[^.]*\b(replacement|replacements|replace it|exchange)\b", re.I), "replaces"),
    (re.compile(rf"\b{_NEG}\b[^.]*\bcancel", re.I), "cancels"),
    (re.compile(r"\b(don'?t|do not|never|no)\b[^.]*\brefund", re.I), "refunds"),
]


def forbidden_capabilities(text: str) -> list[str]:
    """What a rule's text forbids, as capabilities, in a fixed order."""
    found = [capability for pattern, capability in _CHECKS if pattern.search(text or "")]
    # "phone only, never email" must not also forbid phone calls.
    if EMAIL in found and PHONE in found:
        if re.search(r"\b(phone|call)\b[^.]*\bonly\b|\bonly\b[^.]*\b(phone|call)\b", text, re.I):
            found.remove(PHONE)
        elif re.search(r"\be-?mail\b[^.]*\bonly\b|\bonly\b[^.]*\be-?mail\b", text, re.I):
            found.remove(EMAIL)
    return found


# Capabilities that act on one entity (an order): a rule naming such entities narrows only these.
ENTITY_ACTIONS = frozenset({"cancels", "replaces", "refunds", "returns"})


def infer_enforcement(text: str, domain: Domain | None = None) -> dict:
    """A structured check for a rule's text: {"block_tools": [the domain's tools with a forbidden
    capability]}, or {}.

    "Don't cancel <order>": a rule naming its entities blocks the entity actions on those only
    (`only_on`, for the tools in `narrowed_tools`; the guard also counts IDs one slip away), not
    a cancellation the customer asks for on another one. Contact tools stay blocked ticket-wide."""
    domain = domain or get_domain()
    forbidden = forbidden_capabilities(text)
    blocked: list[str] = []
    for capability in forbidden:
        blocked.extend(t for t in domain.tools_with(capability) if t not in blocked)
    if not blocked:
        return {}
    out: dict = {"block_tools": blocked}
    named = [v for kind, v in domain.find_ids(text) if kind == domain.owner_kind]
    narrowed = [t for c in forbidden if c in ENTITY_ACTIONS for t in domain.tools_with(c)]
    if named and narrowed:
        out["only_on"] = named
        out["narrowed_tools"] = sorted(set(narrowed))
    return out


# --- authority: who may change a rule -------------------------------------------------------

# Staff > what the customer stated > the model (and the summariser, which only proposes).
AUTHORITY = {"staff": 3, "system": 3, "customer": 2, "model": 1, "summariser": 1}
# How much of the case a scope covers: widening a restriction adds to it, narrowing lifts part of it.
BREADTH = {"order": 1, "ticket": 2, "customer": 3}
SCOPES = tuple(BREADTH)


class RuleRefused(ValueError):
    """A rule change the asker has no authority for, or a scope that names nothing real."""


def check_scope(scope: str, scope_ref: str, *, orders: set[str]) -> str:
    """The scope_ref to store: an order-scoped rule names one of the ticket's verified orders; others name nothing."""
    if scope not in BREADTH:
        raise RuleRefused(f"Scope must be one of {', '.join(SCOPES)}.")
    scope_ref = (scope_ref or "").strip()
    if scope == "order":
        if not scope_ref:
            raise RuleRefused("An order-scoped rule needs scope_ref: the order number, copied from the ID ledger.")
        if scope_ref not in orders:
            raise RuleRefused(
                f"scope_ref '{scope_ref}' is not a verified order of this ticket; copy an order number "
                "from the ID ledger."
            )
        return scope_ref
    if scope_ref:
        raise RuleRefused(f"scope_ref names an order, so it goes with scope 'order', not '{scope}'.")
    return ""


@dataclass(frozen=True)
class PinPlan:
    """What a pin does to the rule with the same text (None: there is none yet)."""

    create: bool
    status: str  # active or candidate
    scope: str
    scope_ref: str


def plan_pin(existing, *, source: str, scope: str, scope_ref: str) -> PinPlan:
    """A pin by `source` of a rule whose text matches `existing` (status, source, scope, scope_ref, confirmed), or None.

    The model may add restrictions: a new rule of its own stays a candidate (enforced,
    marked unconfirmed) until staff confirm it, and it may widen a rule's scope. It
    never lifts, narrows, re-targets or revives (once dismissed) a rule, and never
    changes one stated by someone with more authority than itself.
    """
    by_model = AUTHORITY.get(source, 0) < AUTHORITY["customer"]
    if existing is None:
        return PinPlan(True, "candidate" if by_model else "active", scope, scope_ref)
    if not by_model:
        return PinPlan(False, "active", scope, scope_ref)
    if existing.status in ("dismissed", "closed"):
        raise RuleRefused(
            f"Staff {existing.status} this rule; it stays {existing.status}. Follow it only if the "
            "customer states it again."
        )
    narrower = BREADTH[scope] < BREADTH[existing.scope]
    retargeted = scope == existing.scope == "order" and scope_ref != existing.scope_ref
    if narrower or retargeted:
        who = "staff" if existing.confirmed else existing.source
        raise RuleRefused(
            f"This rule is in force for {existing.scope} {existing.scope_ref}".rstrip()
            + f" (stated by {who}); you may not narrow or move it. It stays as it is."
        )
    if BREADTH[scope] > BREADTH[existing.scope]:
        return PinPlan(False, existing.status, scope, scope_ref)
    return PinPlan(False, existing.status, existing.scope, existing.scope_ref)
