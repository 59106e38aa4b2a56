"""Spotting rules in what people type, and turning rule text into checks.

A cheap classifier pass, not a model: it flags imperative and negative
phrasing as *candidates*. Staff (or the agent via `pin_constraint`) decide.
"""

from __future__ import annotations

import re

# A directive, not a description: "don't"/"never" opening a clause ("Please
# don't call", "…, never email") or aimed at something the desk could do;
# "they don't fit" and "it never arrived" are not rules.
_ACTIONS = (r"(?:e-?mail|call|phone|ring|text|sms|contact|send|cancel|refund|ship|deliver|offer|replace|"
            r"exchange|charge|bill|share|give|leave|post|close|change|use)")
_TRIGGERS = re.compile(
    r"(?:^|[,;:(]\s*|\b(?:please|and|but|so|just|also)\s+)(?:don'?t|do not|never)\b"
    rf"|\b(?:don'?t|do not|never)\s+(?:ever\s+)?{_ACTIONS}"
    r"|\bwhatever you do\b|\bi (?:don'?t|do not) want\b|\bmust not\b|\bmustn'?t\b|\bno more\b"
    r"|\bstop (?:sending|calling|emailing)\b|\bnot (?:by|via) (?:email|e-mail|phone|text)\b"
    r"|\b(?:phone|e-?mail|text|sms|calls?|post|chat)\s+only\b|\bonly\s+(?:by|via|over|through|call|phone|e-?mail|text|contact|refund|to)\b"
    r"|\bno (?:replacements?|e-?mails?|calls?|store credit|refund|exchange|insurance|bags|need to)\b"
    r"|\bi only want\b|\bonly want (?:to|the|a|an|early|late)\b|\bthe only \w+(?: \w+)? i want\b"
    r"|\bnothing else\b",
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
# (pattern over the rule text, tools it blocks). Patterns are deliberately
# narrow: a structured check that misfires would block legitimate work.
_CHECKS: list[tuple[re.Pattern, list[str]]] = [
    (re.compile(rf"\b{_NEG}\b[^.]*\b(e-?mails?|emailing)\b|\b(phone|call|calls|text)\s+only\b|\bonly\s+(by\s+)?(phone|call)", re.I), ["send_email"]),
    (re.compile(rf"\b{_NEG}\b[^.]*\b(phone|call|calls|calling)\b|\b(e-?mail)\s+only\b|\bonly\s+(by\s+)?e-?mail", re.I), ["log_phone_call"]),
    (re.compile(rf"\b{_NEG}\b[^.]*\b(replacement|replacements|replace it|exchange)\b", re.I), ["offer_replacement"]),
    (re.compile(rf"\b{_NEG}\b[^.]*\bcancel", re.I), ["cancel_order"]),
    (re.compile(rf"\b(don'?t|do not|never|no)\b[^.]*\brefund", re.I), ["issue_refund"]),
]


def infer_enforcement(text: str) -> dict:
    """A structured check for a rule's text, e.g. {"block_tools": ["send_email"]}, or {}."""
    blocked: list[str] = []
    for pattern, tools in _CHECKS:
        if pattern.search(text or ""):
            blocked.extend(t for t in tools if t not in blocked)
    # "phone only, never email" must not also block phone calls.
    if "send_email" in blocked and "log_phone_call" in blocked:
        if re.search(r"\b(phone|call)\b[^.]*\bonly\b|\bonly\b[^.]*\b(phone|call)\b", text, re.I):
            blocked.remove("log_phone_call")
        elif re.search(r"\be-?mail\b[^.]*\bonly\b|\bonly\b[^.]*\be-?mail\b", text, re.I):
            blocked.remove("send_email")
    return {"block_tools": blocked} if blocked else {}
