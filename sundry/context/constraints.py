"""Which sentences of a customer's message state a constraint: the low threshold that decides what
a summary quotes word for word.

Two thresholds, two consequences. `rules.candidate_rules` (the *enforce* threshold) flags narrow
directive phrasing ("never email me", "phone only"); a sentence it flags becomes a candidate
rule, enforced at once. This module's `constraint_sentences` (the *quote* threshold) flags far
more — every sentence where the speaker limits what they want ("I'd prefer white", "keep the
leather strap", "only if it costs under $100") — and a sentence it flags is only quoted verbatim
in the compaction summary's constraints; it is enforced only if the enforce threshold flags it
too. A wide net here costs a quoted sentence, never a blocked request.

What counts is written once, in docs/how-it-works.md ("What counts as a customer constraint"). The
method is a small grammar, not a list of cases: a sentence is flagged when one of its clauses has
both a *stance* (the speaker or their request: I/we wanting, please, can you, an imperative, a
verbless "no X"/"just X"/"X only", a "should stay") and a *limit* (a negation of a wish or an
action, only/except/instead of/rather/prefer/keep/without/unless, "just" before what it narrows,
"stay the same"/"stay as it is", "has to", a standing "for any" or "always" before a handling
verb, "that's all I want changed", not before an event ("until you", "hold off", "not yet"), one
step at a time, a time window, a ceiling, a floor). A condition that is not a courtesy ("if there are colours, I'd like white"; not "if
possible") or a bound anywhere in the sentence limits the wish it qualifies. Not limits: a negated
past ("it never arrived"), negated knowing or having ("I don't remember my email"), temporal or
emphatic "just" ("I just received it", "just cancel it"), inference ("I must have mixed it up"),
making sure of one's own doing ("I want to make sure I do it right"), what a change replaces
("change it to black instead of silver"). A question that asks — for a fact, for leave, for
information — sets no limit even when it names one; a request worded as a question does.

Lasting rules worded without "I want" or "please" have a stance too: a duty on the handling whatever
its subject ("refunds should go to …"), the agent addressed with a modal of leave or duty ("you can
use the same card"), the customer's acceptance or refusal ("I'm fine with … for any difference",
"I'm not willing to …"), a modal of preference ("would rather", "'d sooner"), a budget, an approval,
an availability window. And limits include timing and duration (later, for now, first, not … yet,
before doing, from now on, every time), an action a change replaces ("instead of cancelling"),
manner for every later step ("step by step", "in writing"), and a verbless "nothing on the gift card".
The customer's own plan ("I'll check my email later") and a closing ("that's all for now") are not.

Also: a bound "up to $650"; all or nothing ("these changes as a package") bounds the whole sentence; a
preference in the passive ("PayPal is preferred for the refund"); "any price difference should …";
a course to take under a condition worded as a bare imperative ("if it can't be returned, see if it
can be cancelled"; try, get, find, pick, look for); a condition opening "in case …". Not limits: a
goal ("the maximum compensation possible"), asking to know or check something first, the customer's
own plan with "first" ("I'll first ask about …"), "if available" (a courtesy as "if possible" is),
both options named ("waterproof or not"), a bare "prefer …" listing features of the new item a change
asks for ("modify it to purple, and prefer polyester").
"""

from __future__ import annotations

import re

# A sentence ends at . ! ? or a line break; "40.00" and "7.30" stay whole.
_SENTENCE = re.compile(r"\S.*?(?:[.!?]+(?=\s|$)|\n|$)", re.S)
# Clauses: punctuation, dashes and the conjunctions that start a new one.
_CLAUSE = re.compile(r"\s*(?:[,;:()\u2014\u2013]|\s-\s|\b(?:but|and|so|because|though|although|while|then)\b)\s*", re.I)

# What an agent does to a case: a limit on one of these is a limit on the handling.
_HANDLING = (
    r"(?:cancel\w*|chang\w*|modif\w*|updat\w*|book\w*|buy\w*|purchas\w*|pay\w*|charg\w*|refund\w*|"
    r"return\w*|exchang\w*|swap\w*|replac\w*|send\w*|sent|ship\w*|deliver\w*|transfer\w*|call\w*|phon\w*|"
    r"e-?mail\w*|text\w*|contact\w*|talk\w*|speak\w*|shar\w*|typ\w*|say|add\w*|remov\w*|includ\w*|"
    r"upgrad\w*|downgrad\w*|spend\w*|us(?:e|ed|ing)|los[et]\w*|delet\w*|reset\w*|restart\w*|risk\w*|guess\w*|do|done)"
)

# --- stance: a wish or a request the clause voices ------------------------------------
# The speaker wanting, needing or choosing (not merely being or seeing: "I'm not connected" is a state).
_WISH = (
    r"(?:want\w*|need\w*|like|prefer\w*|rather|wish|insist\w*|decided|choose|stick|take|keep|leave|use|pay|"
    r"go ahead|accept|allow|agree|'d|would|will|'ll|shall|should|must|can|may)"
)
_FIRST = rf"(?:\blet me\b|\b(?:i|we)\b(?:'\w+)?(?:\s+[\w']+){{0,3}}?\s*{_WISH}\b|\blet's\b|\bthe only \w+(?: \w+)? (?:i|we) (?:want|need|'d like|would like)\b)"
_REQUEST = r"\b(?:please|pls|can you|could you|would you|will you|can we|could we|make sure|be sure|kindly)\b"
# "only"/"just" open an imperative when a verb follows ("only deliver after 6pm"), not a noun phrase
# ("only the screen is scratched"); a short verbless "no insurance" is `_verbless_directive`'s.
_IMPERATIVE = (
    r"(?:don't|do not|never|only(?!\s+(?:the|a|an|my|this|that|these|those|one|two|some|any|"
    r"something|anything|\w+ing)\b)|keep|"
    r"leave|send|ship|deliver|call|phone|ring|e-?mail|text|contact|"
    r"use|avoid|stop|cancel|refund|return|exchange|change|remove|add|switch|hold|wait|put|charge|book|"
    r"go ahead|go|proceed|make|give|pay|swap|upgrade|downgrade|explain|"
    # instructions about what to tell, check or apply first, and standing notes ("note that …")
    r"let me know|tell me|check with me|ask me|confirm with me|apply|process|transfer|rebook|move|include|"
    r"note|remember|bear in mind|stick|limit|restrict|reach|write|skip|omit|exclude|prefer|"
    # a course to take ("if it can't be returned, see if it can be cancelled", "… then try to upgrade")
    r"get|find|try|see if|see whether|check if|check whether|look for|ask for|choose|pick|select|opt for|settle for)"
)
# The agent addressed with a modal of leave or duty ("you can use the same card", "you shouldn't
# call"), not asked to inform ("can you tell me"); the customer's acceptance ("I'm fine with …"); a
# modal of preference standing for its subject in a coordinated clause ("… and would rather wait").
_ADDRESSED = (
    rf"\byou (?:can|could|may|should|must|shouldn't|mustn't|need to|have to|are to) (?:just |also |still |always )?"
    rf"(?!do\b|done\b){_HANDLING}\b"
    r"|\b(?:i'm|i am|we're|we are|i'd be|we'd be|i would be) (?:\w+ )?(?:(?:fine|ok|okay|open|good) with|(?:fine|ok|okay|happy|willing|ready|prepared|comfortable) to)\b"
    r"|\b(?:would|'d) (?:much )?(?:rather|prefer|sooner)\b"
)
# A duty on the handling, whatever its subject ("refunds should go to …", "it must stay …"), not an
# inference ("should have"); a budget or a cap the speaker states.
_DUTY = (
    r"\b(?:should|shouldn't|must|mustn't|has to|needs to)\s+(?:not\s+|never\s+|only\s+|always\s+|still\s+)?"
    r"(?:be|go|stay|remain|arrive|come|include|ship|cost|happen|get|use)\b"
    r"|\b(?:my|our) (?:budget|limit|max(?:imum)?|cap|approval|permission|consent|go-ahead)\b"
    # availability stated as a window ("I'm only available on weekends"), a flat preference ("email is
    # best"), an absolute ("under no circumstances", "no matter what")
    r"|\b(?:i'm|i am|we're|we are) (?:only |not |never )?(?:available|free|reachable|home)\b"
    r"|\b(?:is|are|works?) best\b|\bunder no circumstances\b|\bno matter what\b"
    r"|\bit's (?:important|essential|crucial|vital) (?:that|to)\b"
    # a preference stated in the passive ("PayPal is preferred for the refund", "would be preferable")
    r"|\b(?:is|are|would be)\s+(?:\w+\s+)?(?:prefer+ed|preferable|my (?:preference|first choice))\b"
)
_STANCE = re.compile(
    rf"{_FIRST}|{_REQUEST}|{_ADDRESSED}|{_DUTY}|\b(?:will|should|must|has to|have to|needs to|need to)\s+(?:stay|remain)\b|\b(?:it|this|that|they|the \w+|my \w+) (?:has to|have to|needs to|need to|must|mustn't|should|shouldn't)\b|^\s*(?:(?:also|and|but|so|then|actually|alright|ok(?:ay)?)\s+)?"
    rf"(?:please\s+)?(?:just\s+|always\s+)?{_IMPERATIVE}\b",
    re.I,
)

# --- limit: what narrows what may be done ---------------------------------------------
_TIME = (
    r"(?:\d|noon|midnight|morning|afternoon|evening|tonight|tomorrow|today|monday|tuesday|wednesday|thursday|"
    r"friday|saturday|sunday|weekend|weekday|next week|the end of)"
)
_LIMIT = re.compile(
    r"n't\b|\bnot\b|\bnever\b|\bno\b|\bnothing (?:else|less|more)\b|\bnone\b|\bneither\b|\bnor\b"
    # "just" narrows what follows it ("just the lamp", "just for me"), not a verb ("just cancel it")
    r"|\bonly\b|\bjust (?:the|a|an|one|two|that|this|those|these|my|for|what)\b|\bexcept\b|\bother than\b"
    r"|\bapart from\b|\banything but\b|\binstead of\b|\brather\b"
    # "keep" a thing (not "keep an eye out"); "the same" only kept or as a price ceiling
    r"|\bprefer\w*|\bkeep\b(?! (?:an? |any |in mind|track))|\bleave (?:it|them|that|this|the|my|everything)\b"
    r"|\b(?:stay|stays|remain|remains|keep|be) the same\b|\b(?:stay|stays|remain|remains)\b|\b(?:stay|stays|remain|remains) as (?:it|they) (?:is|are)\b|\bsame (?:price|cost|amount)\b|\bwithout\b|\bunless\b"
    # a standing scope ("for any difference") and an outcome floor ("good isn't enough")
    # timing: not before an event ("wait until the parcel is back", "before you cancel it"), not now
    r"|\b(?:until|till|before|only once)\s+(?:i|i've|i'm|we|you|it|it's|they|the|my|he|she|that's|this)\b"
    r"|\b(?:before|without|after)\s+(?:\w+ing)\b|\bin writing\b|\bto \w+(?: \w+)? yet\b"
    r"|\b(?:any|every|all)\s+(?:\w+\s+){0,2}(?:should|must|has to|have to|needs to|need to)\b"
    r"|\b(?:would|'d) sooner\b|\b(?:skip|omit|exclude)\b|\b(?:all|any) (?:communication|contact|correspondence|updates)\b"
    r"|\b(?:my|our) (?:budget|approval|permission|consent|go-ahead)\b|\b(?:is|are|works?) best\b"
    r"|\bhold off\b|\bnot (?:yet|now|right now)\b"
    # not now: later, for now, first (an order of handling); standing: from now on, going forward, every time
    r"|(?<!a )(?<!the )\blater\b|\bfor (?:now|a bit|a while|the moment|the time being)\b|\bfirst\b(?! time)"
    r"|\bfrom now on\b|\bgoing forward\b|\bin (?:the )?future\b|\bevery time\b|\bwhenever\b|\bnext time\b"
    r"|\bfor (?:anything|everything)\b"
    # a standing method or manner ("always use PayPal", "one step at a time")
    rf"|\balways\s+{_HANDLING}\b|\bone (?:step|thing) at a time\b|\bstep[- ]by[- ]step\b|\b(?:go|take it) slow(?:ly)?\b"
    r"|\bfor (?:any|every|all (?:future|my|of my|other))\b|\b(?:is not|isn't|not) enough\b|\bnot just\b"
    rf"|\b(?:that's|that is|this is) (?:all|everything)(?: that)? (?:i|we) (?:want|need)\w*(?: to)? {_HANDLING}\b"
    r"|\bas long as\b|\bprovided\b|\botherwise\b|\bmust\b|\bhas to\b|\bmake sure\b|\bavoid\w*|\bstop\b|\bat (?:most|least)\b|\bor less\b"
    r"|\bno more than\b|\b(?:less|fewer|cheaper|lower) than\b|\b(?:under|below|over|above|up to) \$|\bnothing (?:over|above|below|under)\b"
    # a ceiling ("a maximum of $80", "my max is 300"), not a goal ("the maximum compensation possible")
    r"|\bmax(?:imum)?\b(?!(?:\s+\w+){0,2}\s+possible\b)(?<!\bthe max)(?<!\bthe maximum)"
    # all or nothing: a condition on each part ("I want these changes as a package")
    r"|\bas (?:a|one) (?:\w+ )?(?:package|bundle|whole)\b|\ball[- ]or[- ]nothing\b|\bor (?:none|nothing) at all\b"
    rf"|\b(?:before|after|until|till|between|by)\s+(?:the\s+)?{_TIME}",
    re.I,
)

# --- descriptions: limiting words that narrow nothing ---------------------------------
_PAST = r"(?:\w+ed|got|gotten|came|went|saw|sent|made|paid|bought|found|received|arrived|heard|told|took|gave|left|had|did|was|were|been|moved)"
_KNOW = (
    r"(?:know|remember|recall|recognise|recognize|understand|see|think|believe|have|own|get|find|mind|care|hear|use)"
)
_DESCRIPTION = re.compile(
    # a negated past or perfect: what happened, not what may happen
    r"\b(?:didn't|did not|haven't|have not|hasn't|has not|hadn't|wasn't|was not|weren't|were not|isn't|aren't|"
    r"doesn't|does not|couldn't|could not|can't|cannot|can not)\b(?!\s+enough)"
    rf"|\bnever\s+(?:\w+ly\s+)?{_PAST}\b"
    # negated knowing or having: "I don't remember my email", "I don't have that"
    rf"|\b(?:don't|do not)\s+(?:\w+ly\s+)?{_KNOW}\b"
    # "just" as a time ("I just received it", "just now"), "must have" as an inference
    rf"|\bjust\s+(?:{_PAST}|now|yesterday|today|a (?:minute|moment|second))\b|\bmust have\b|\bmust be\b(?! the same)"
    # "just" as emphasis on a wish or a report ("I just want to be able to call", "just like you said"),
    # and "keep doing" (carrying on), not a limit on what is done
    r"|\bjust\s+(?:really\s+)?(?:want\w*|need\w*|like|as|can|can't|cannot|asking|trying|checking|wondering|to)\b"
    r"|\bkeep\s+(?!(?:every|any|no|some)thing\b)\w+ing\b"
    # asking to know or check something first ("I want to know the tracking number first") asks for
    # information; its "first" orders nothing of the handling
    r"|\b(?:want|like|need)\w* to (?:first )?(?:know|check|see|find out|ask|inquire|learn|look)\b(?:[^,;]*?\bfirst\b)?"
    # a state, not a wish: "I'm not connected", "there's no signal", "I only have one phone"
    r"|\b(?:i'm|i am|it's|it is|that's|that is|there's|there is|there are|they're|we're|is|are|am)\s+(?:\w+ly\s+)?"
    r"(?:still\s+)?(?:not|no|only|just)\b(?!\s+(?:(?:willing|ready|prepared|comfortable|happy|okay|ok|interested) to|(?:okay|ok|fine) with|"
    r"available|free|reachable|home)\b)|\b(?:have|has|had|shows?|says?|see|seeing|showing)\s+(?:\w+\s+)?no\b"
    r"|\b(?:only|just)\s+(?:have|has|had|is|are|was|were|bought|ordered|showing|shows|says|see)\b"
    # "change the lamp to black instead of silver": what is replaced, not an excluded option
    r"|\b(?:chang|switch|swap|exchang|replac|upgrad|convert)\w*\b[^,;.]*?\binstead of\b(?!\s+\w+ing\b)"
    # making sure of one's own doing ("I want to make sure I do it right") limits nothing of the handling
    r"|\bmake sure (?:that )?(?:i|i'm|i've|i'll|i'd|we|we're)\b.*"
    # an answer or a courtesy, not a limit
    # the customer's own plan ("I'll check my email later") says what they will do, not what the agent may
    r"|\b(?:i'll|i will|we'll|we will)\b[^,;.]*?\b(?:later|first)\b"
    # "waterproof or not": both options named, neither ruled out
    r"|\bor not\b"
    # a closing ("that's all for now") is an answer, not a limit
    r"|\ball (?:(?:i|we) (?:need|needed|want|wanted) )?for (?:now|today)\b"
    r"|^\s*no\s*[,.!]|\bno (?:problem|worries|idea|clue|thanks|thank you|way)\b|\bnot sure\b|\bnot yet\b",
    re.I,
)
# "Instead, …", "Otherwise, …" open the clause they qualify: they are not a clause of their own.
_OPENER = re.compile(r"^\s*(instead|otherwise|rather|preferably)\s*,", re.I)
# "Also, …", "Okay, …": a discourse word says nothing of its own.
_DISCOURSE = re.compile(
    r"^\s*(?:also|and|plus|oh|ok|okay|alright|actually|so|well|yes|yeah|sure|hi|hello|"
    r"just so you know|for the record|fyi|by the way|btw)\s*,\s*",
    re.I,
)
_QUOTED = re.compile(r'"[^"]{1,80}"|\u201c[^\u201d]{1,80}\u201d')
# A condition makes an ability or a state a limit ("if I can't get it under $950, cancel it").
_CONDITION = re.compile(
    r"\b(?:if|unless|as long as|provided|only if|in the event|failing that)\b|^\W*(?:(?:and|but|also|so)\W+)?in case\b",
    re.I,
)
# … but "if possible", "if you could", "if so" are courtesies or follow-ups, not conditions.
_COURTESY_IF = re.compile(
    r"\bif (?:it's |that's |it is |that is |this is )?(?:possible|available|ok|okay|fine|alright|all right|an option|needed|"
    r"necessary|so|not too much trouble)\b|\bif (?:you|we) (?:could|can|would|don't mind|need|ever)\b(?!'t| not)"
    r"|\bif (?:that|it) (?:helps|works)\b|\bif (?:you're|you are) (?:able|happy)\b"
    # "see if", "not sure if": whether, not a condition
    r"|\b(?:see|check|know|sure|wonder\w*|ask\w*|find out|tell me|confirm)\s+if\b",
    re.I,
)
# A bound (a ceiling or a time) narrows the whole sentence it stands in, whichever clause holds it.
_BOUND = re.compile(
    r"\bor (?:less|lower|under|below|cheaper)\b|\bno more than\b|\bat most\b|\b(?:less|fewer|cheaper|lower) than\b"
    r"|\b(?:is not|isn't|not) enough\b|\bnothing less\b|\bnot just\b"
    r"|\bas (?:a|one) (?:\w+ )?(?:package|bundle|whole)\b|\ball[- ]or[- ]nothing\b|\bor (?:none|nothing) at all\b"
    rf"|\b(?:under|below|over|above|up to) \$|\bnothing (?:over|above)\b|\b(?:before|after|until|till|no later than)\s+(?:the\s+)?{_TIME}",
    re.I,
)
# A question asks: for a fact, for leave ("can I …?"), for information ("can you tell me …?"); it sets
# no limit even when it names one. A request worded as a question ("can you make sure …?") still does.
_QUESTION = re.compile(
    r"^\s*(?:(?:\w+|ok(?:ay)?|so|and|also|or|but|actually|then)\s*,?\s+)?(?:is|are|was|were|does|do|did|should|shall|"
    r"what|which|when|where|why|how|who|whom|will (?:it|that|this|i)|would (?:it|that|this)|can i|could i|may i|"
    r"am i|have i|has|have you)\b"
    r"|\b(?:can|could|would|will) you (?:please )?(?:just )?(?:tell|show|let me know|guide|walk|explain|check|give me|"
    r"help me (?:find|figure|understand|check)|look|confirm)\b",
    re.I,
)


# A change to a new item ("modify the shirt to purple", "exchange the lamp for a brighter one"): a bare
# "prefer …" beside it lists features of that item, the request's target, not a standing preference.
_NEW_ITEM = re.compile(r"\b(?:modif|exchang|chang|switch|swap|replac|upgrad)\w*\b[^.;]*?\b(?:to|for|into)\b", re.I)
_FEATURE_PREFERENCE = re.compile(r"^\W*(?:and\s+|but\s+)?prefer\w*\b", re.I)

_ABILITY = re.compile(r"\b(?:can't|cannot|can not|couldn't|could not|isn't|is not|doesn't|does not)\b", re.I)


def _limits(clause: str, conditional: bool) -> bool:
    """The clause holds a limit once its descriptions are taken out; under a condition a state or an
    ability it cannot reach is the limit ("if I can't get it under $950", "if that's not possible")."""
    if conditional and _ABILITY.search(clause):
        return True
    return bool(_LIMIT.search(_DESCRIPTION.sub(" ", clause)))


_FINITE = re.compile(r"\b(?:is|are|was|were|has|have|had|does|do|did|will|would|can|could|got|seems?|looks?)\b", re.I)


def _verbless_directive(clause: str) -> bool:
    """ "no insurance", "phone only", "nothing else", "just the lamp", "not just good": a limit with
    no verb of its own."""
    words = clause.split()
    if _FINITE.search(clause):  # "only the screen is scratched" has a verb: a report, not a directive
        return False
    return 1 < len(words) <= 6 and bool(
        re.match(
            r"(?i)^(?:and\s+|but\s+)?(?:no|not|nothing|only|just|without)\b(?!\s+(?:\w+ing|to)\b)|.*\bonly$",
            clause.strip(),
        )
    )


def _verbless_limit(clause: str) -> bool:
    return _verbless_directive(clause) and not re.match(r"(?i)^\s*(?:and\s+|but\s+)?just\b", clause)


def is_constraint(sentence: str, *, stance: bool = True, limit: bool = True) -> bool:
    """Does the sentence state a constraint (the quote threshold)? `stance` / `limit` off: that feature
    is taken as always present (the ablations the docs report as controls)."""
    text = (sentence or "").replace("\u2019", "'").replace("\u2018", "'")
    text = _QUOTED.sub(" ", text)  # what a screen or someone else said is not the speaker's limit
    text = re.sub(r"###\w+###", " ", text)  # a transcript's control token ("###STOP###") is nobody's words
    if len(text.strip()) < 4:
        return False
    last = re.split(r"[,;:\u2014\u2013]|\s-\s", text)[-1]
    if text.rstrip().endswith("?") and (_QUESTION.search(text) or _QUESTION.match(last)):
        return False
    conditional = bool(_CONDITION.search(_COURTESY_IF.sub(" ", text)))
    bound = bool(_BOUND.search(text)) and limit
    clauses = [c for c in _CLAUSE.split(_OPENER.sub(r"\1", _DISCOURSE.sub("", text))) if c and c.strip()]
    # a verbless "nothing on the gift card" is its own limit, as "no insurance" is ("just return both"
    # opens a request: "just" before a verb narrows nothing)
    new_item = bool(_NEW_ITEM.search(text))
    limits = [
        (
            (_limits(c, conditional) or _verbless_limit(_DESCRIPTION.sub(" ", c)))
            and not (new_item and _FEATURE_PREFERENCE.match(c))
        )
        if limit
        else True
        for c in clauses
    ]
    stances = []
    for i, c in enumerate(clauses):
        # A verbless "no insurance" / "not the Seattle one" speaks for the clause before it: a limit
        # after a wish ("… included, and no insurance"), a report after a report ("I'm still seeing
        # No Signal and no service"); opening the sentence, it is a directive of its own.
        verbless = _verbless_directive(c) and (i == 0 or any(stances))
        # One word ("phone", "storage") names a thing; it does not command anything.
        said = bool(_STANCE.search(c)) and (len(c.split()) > 1 or bool(re.fullmatch(rf"\s*{_REQUEST}\W*", c, re.I)))
        stances.append(said or verbless if stance else True)
    if conditional or bound:
        # "if there are colours, I'd like white", "for flights of 3 hours or less, upgrade me": the
        # condition or the bound limits the wish it qualifies, in whichever clause that stands
        return any(stances)
    return any(a and b for a, b in zip(limits, stances))


def sentences(text: str) -> list[str]:
    """The sentences of `text`, verbatim, in order."""
    return [m.group(0).strip() for m in _SENTENCE.finditer(text or "") if m.group(0).strip()]


def constraint_sentences(text: str, **features) -> list[str]:
    """Sentences of a customer's `text` that state a constraint, verbatim and in order."""
    return [s for s in sentences(text) if is_constraint(s, **features)]
