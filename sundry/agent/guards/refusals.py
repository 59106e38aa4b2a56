"""A reply that is nothing but a refusal of help answers nothing. Pure.

A small model asked "Where is my order?" or "Refund please" may call no tool and write only
"I'm sorry, but I can't assist with that." (Qwen2.5-Coder-0.5B did, five times on one ticket:
issue 26). Nothing in it is false about the records, so no claim reading holds it, yet the
customer is left with nothing and staff are never told: the shop could help, the model did
not. Such a reply is read as not answering, like an empty one: the reply check asks for it
again, then holds it (reason `bare_refusal`), and the hold's hand-off tells the customer that
a person will reply while staff read the model's words on the desk (`handoff`).

Read only when the whole reply is that refusal (`bare`): an optional greeting and apology
("I'm sorry, but", "Unfortunately,", "I apologize for any inconvenience;"), "I" or "we" with
a negated ability ("can't", "cannot", "am unable to", "won't be able to", "must decline"),
a verb of helping itself (help, assist, do, support, process, handle …) and at most a
pronoun or "this request" for an object ("with that", "this request", "it", "for you", "right
now") — then the end, or a closing courtesy: "Thank you for understanding.", or the general
offer such a refusal ends on ("If you have any other questions, feel free to ask.", "Is there
anything else I can help you with?"), which leaves the request itself as unanswered. Anything
more is an answer of sorts and passes: a reason ("…, because it has shipped"), an alternative
("…, but I can start a return"), a question about the request ("Which order is it about?"),
information ("I can't find that order — could you check the number?", "I can't share another
customer's details", which names what is refused), an offer ("I can help with that."), what
the customer can't do ("you can't return it after 30 days"), and the general offer alone.

A greeting, apology or word of assent that is a sentence of its own ("I'm sorry. I can't help with
that.", "Certainly! …") is `lead_in`: the stream shows it only with the sentence after it (`provisional`).
"""

from __future__ import annotations

import re

# Longer than any refusal the grammar reads: a long reply is never read (and the pattern never runs long).
MAX_CHARS = 300

_GREETING = r"(?:(?:hi|hello|hey)(?:\s+there)?\s*[,!.]?(?:\s+|$))?"
_SORRY = (
    r"(?:(?:i'm|i\s+am|im|we're|we\s+are)\s+(?:(?:very|so|really|truly|terribly|extremely)\s+)?sorry"
    r"|sorry|(?:i|we)\s+(?:(?:do|sincerely|truly|really)\s+)?apologi[sz]e|(?:my|our)\s+apologies|apologies"
    r"|unfortunately|regrettably|sadly|(?:i'm|i\s+am|im|we're|we\s+are)\s+afraid)"
    r"(?:\s+for\s+(?:any|the)\s+(?:inconvenience|confusion))?"
)
# An apology or "Unfortunately" before the refusal, with its punctuation and a "but"/"however" after.
_OPENER = _SORRY + r"\s*(?:[,;:.!]+\s*|\s[—–-]+\s*|\s+)(?:(?:but|however|though)\s*,?\s+)?"
_CONJ = r"(?:(?:but|however)\s*,?\s+)?"
# "I"/"we" and an ability denied.
_NOT_ABLE = (
    r"(?:i|we)\s+(?:(?:really|just|simply|unfortunately|currently)\s+)?"
    r"(?:can't|cannot|can\s+not|couldn't|could\s+not|won't\s+be\s+able\s+to|will\s+not\s+be\s+able\s+to"
    r"|(?:don't|do\s+not)\s+think\s+(?:i|we)\s+can)"
    r"|(?:i'm|i\s+am|im|we're|we\s+are)\s+(?:(?:really|just|simply|unfortunately|currently)\s+)?"
    r"(?:unable|not\s+able|not\s+allowed|not\s+permitted|not\s+in\s+a\s+position)\s+to"
)
# Helping itself, no more: not "cancel a shipped order", "share another customer's details", "find that order".
_VERB = (
    r"(?:help|assist|do|support|process|handle|fulfil|fulfill|complete|action|answer|respond\s+to|comply\s+with"
    r"|take\s+care\s+of|provide\s+(?:any\s+)?(?:help|assistance|support)|be\s+of\s+(?:any\s+)?(?:help|assistance)"
    r"|offer\s+(?:any\s+)?(?:help|assistance))"
)
# A pronoun or "this request" for what is refused: nothing named, nothing told.
_OBJECT = (
    r"(?:\s+you)?(?:\s+(?:with|on)(?:\s+(?:that|this|it))?)?"
    r"(?:\s+(?:that|this|it|(?:this|that|your|such\s+a|the)\s+(?:request|question|query|task|one)))?"
    r"(?:\s+for\s+you)?(?:\s+(?:right\s+now|at\s+the\s+moment|at\s+this\s+time|at\s+present|here|today|currently))?"
)
_DECLINE = (
    r"(?:i|we)(?:\s+must|\s+have\s+to|\s+will\s+have\s+to|'ll\s+have\s+to|\s+need\s+to)\s+(?:respectfully\s+)?decline"
)
_NOT_SOMETHING = (
    r"(?:that|this|it)(?:'s\s+not|\s+is\s+not|\s+isn't)\s+something\s+(?:i|we)\s+(?:can|am\s+able\s+to"
    r"|'m\s+able\s+to|are\s+able\s+to)\s+" + _VERB + r"(?:\s+(?:with|on))?(?:\s+here)?"
)
_CORE = (
    r"(?:(?:" + _NOT_ABLE + r")\s+" + _VERB + _OBJECT + r"|" + _DECLINE + _OBJECT + r"|" + _NOT_SOMETHING + r")"
    r"(?:\s*,\s*(?:sorry|i'm\s+afraid|unfortunately))?"
)
_END = r"\s*[.!…]*"
# A closing courtesy that adds nothing: "I apologize for any inconvenience.", "Thank you for understanding.", and
# the general offer a refusal ends on — "If you have any other questions, feel free to ask.", "Is there anything
# else I can help you with?" — which leaves the customer's own request as unanswered as before.
_ELSE = r"(?:anything\s+else|something\s+else|(?:any\s+)?(?:other|further)\s+(?:questions?|requests?|concerns?))"
_HELP_WITH = r"(?:that\s+)?(?:i|we)\s+(?:can|could|may)\s+(?:help|assist)(?:\s+you)?\s+with(?:\s+today)?"
_CLOSING = "|".join(
    (
        r"if\s+(?:you\s+have|there\s+is|there's)\s+" + _ELSE + r"(?:\s+or\s+need\s+(?:help|assistance)\s+with\s+"
        r"(?:anything|something)\s+else)?(?:\s+(?:i\s+can\s+help\s+with|you\s+need(?:\s+help\s+with)?))?\s*,?\s+"
        r"(?:(?:please\s+)?(?:feel\s+free\s+to\s+ask|let\s+me\s+know|ask|don't\s+hesitate\s+to\s+ask)"
        r"|i'm\s+here\s+to\s+help|i'd\s+be\s+happy\s+to\s+help)",
        r"is\s+there\s+" + _ELSE + r"\s+" + _HELP_WITH,
        r"how\s+else\s+(?:can|may)\s+i\s+(?:help|assist)(?:\s+you)?(?:\s+today)?",
        r"(?:can|may)\s+i\s+(?:help|assist)(?:\s+you)?\s+with\s+" + _ELSE + r"(?:\s+today)?",
        r"(?:please\s+)?let\s+me\s+know\s+if\s+(?:there's|there\s+is)\s+" + _ELSE + r"\s+" + _HELP_WITH,
    )
)
_COURTESY = (
    r"(?:\s+(?:(?:i|we)\s+(?:(?:do|sincerely)\s+)?apologi[sz]e\s+for\s+(?:any|the)\s+inconvenience"
    r"|sorry\s+for\s+(?:any|the)\s+inconvenience|(?:thank\s+you|thanks)\s+for\s+(?:your\s+)?understanding|"
    + _CLOSING
    + r")\s*[.!?…]*)*"
)
_BARE = re.compile(
    _GREETING + r"(?:(?:" + _OPENER + r")*" + _CONJ + _CORE + _END + r"\s*)+" + _COURTESY + r"\s*",
    re.I,
)
_QUOTES = re.compile(r"[\"“”]")
# A word of assent that answers nothing by itself: "Certainly!", "Sure thing.", "Of course —".
_ASSENT = (
    r"(?:certainly|sure(?:\s+thing)?|of\s+course|absolutely|definitely|okay|ok|alright|all\s+right|no\s+problem"
    r"|gladly|great(?:\s+question)?|understood|got\s+it)"
)
# What may open a bare refusal, or any reply, as a sentence of its own: "Hi there!", "I'm sorry.", "Certainly!".
_LEAD_IN = re.compile(_GREETING + r"(?:(?:" + _SORRY + r"|" + _ASSENT + r")\s*(?:[,;:.!…]+|\s[—–-]+)?\s*)*", re.I)


def _plain(text: str) -> str:
    plain = " ".join((text or "").replace("\u2019", "'").replace("\u2018", "'").split())
    return _QUOTES.sub("", plain).strip()


def bare(text: str) -> bool:
    """Whether `text`, whole, is a refusal of help with no reason, alternative, information or question."""
    plain = _plain(text)
    return bool(plain) and len(plain) <= MAX_CHARS and _BARE.fullmatch(plain) is not None


def lead_in(text: str) -> bool:
    """Whether `text`, whole, is only a greeting, an apology or a word of assent ("I'm sorry.", "Hi there!
    Unfortunately,", "Certainly!"): what a bare refusal, or a reply the check holds, may open with as a sentence
    of its own. A stream shows it only with what follows (`provisional`): shown alone, it would be kept as the
    reply and what came after it held, the customer reading "Certainly!" and no hand-off (real-model run 18)."""
    plain = _plain(text)
    return bool(plain) and len(plain) <= MAX_CHARS and _LEAD_IN.fullmatch(plain) is not None
