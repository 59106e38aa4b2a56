"""Does a reply say something was done that the records do not show?

Pure. A sentence that tells the customer an action is done ("your order …
has been cancelled", "I've issued a refund of 48.99 USD") is a claim of that
action's kind. A claim stands when the ticket's records back it: an action of
that kind that ran on this ticket (`ActionTaken`, written by code at tool
success), a ledger entry whose description or note a tool result gave that
status, or — for refunds — money the money lane shows refunded. A claim nothing
backs is a false statement to a customer: the reply is asked for again, then
held (`answer.checked_claims`).

A refund claim that names an amount ("a refund of 48.99 USD") stands only when
the records show a refund of that amount — one refund, or all refunded on the
order — in that currency: the right action with the wrong figure is still a
false statement. Other amounts in the sentence may be what the order cost.

A reply speaks of actions in four more ways (`claimmodes`): pending ("your
refund is being processed"), promised ("I'll cancel it once you confirm"),
refused ("staff declined the refund") and denied ("no, nothing was
cancelled"). Those are judged against the same records plus the open and
declined confirmation cards and staff holds (`Proposal`, read once per step by
`proposals`): a promise stands on an open card or hold for that action and
record, or on one that ran (a cancellation whose declaration says it refunds
backs "the full amount will be refunded"); a refusal on a declined one; a
denial falls when the action ran. A question or an offer ("I can …", "would you
like me to …") claims nothing. Which tools count for which kind comes from the
domain's declaration (the consent action, the capabilities, a declared
refund), never from a tool's name.

A reply may also say the customer confirmed an action ("the customer has
confirmed the refund on <order>", "you agreed to cancel it"): a claim that a
confirmation exists (`confirmclaims`, mode AGREED), which stands only on a
card for that action confirmed by the customer or by staff on their behalf
(`Proposal.confirmed`), on the record and for the figure it names — whatever
the actions lane shows, since an action that ran with no card had none.

A reply may also state a fact of the customer's record: its status ("your order
<ref> has been delivered", "order status: delivered"), a date of it ("it shipped on
3 August"), or a figure ("The amount is 20.00"): claims of mode STATED
(`statusclaims`), which stand only on the domain's records as they are now
(`tooling.records.RecordState`) or on what the tool results shown said. So may
a sentence that says what an identifier is ("<ref> is the customer ID for …",
"your tracking number is <ref>"): a STATED claim of kind `IDENTITY`
(`identityclaims`), false when the ID ledger says the ID is of another kind.

Beyond those six kinds, each write's own words (`claimverbs`: its name and its
declared `claim_verbs` and `claim_nouns`) make kinds of their own — "your
flight has been upgraded" is an "upgrade flight" claim, backed only by a write
that declares that pair — judged in every mode the same way.

An offer ("I can refund 48.99 USD on <order> now", "I'm able to cancel it for
you", "shall I call you?") claims the action is open to the customer: it is
held when no tool of the desk does it, when a rule in force forbids every tool
that would (and no card stands for it), when a card or hold for it was
declined and none is open, when it is done already (a cancellation that ran,
an order with nothing left to refund), and when it names a figure other than
its open card's or more than its order has left to refund. A promise to
contact the customer ("I'll e-mail you the label", "we will call you
tomorrow") stands only on an open card or hold for a contact tool — an e-mail
sent before promises no new one — and never where a rule forbids the channel.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation

from sundry.agent.guards import (
    bareclaims,
    claimlists,
    claimmodes,
    claimverbs,
    confirmclaims,
    identityclaims,
    objectpromises,
    presentclaims,
    statusclaims,
)
from sundry.agent.guards.provisional import sentences
from sundry.agent.guards.replycheck import id_tokens
from sundry.context.rules import infer_enforcement
from sundry.core.money import CODES, MoneyError, exponent

REFUND, CANCEL, RETURN, REPLACE, EMAIL, PHONE = "refund", "cancel", "return", "replace", "email", "phone"
KINDS = (REFUND, CANCEL, RETURN, REPLACE, EMAIL, PHONE)
_CAPABILITY_KIND = {
    "refunds": REFUND,
    "cancels": CANCEL,
    "returns": RETURN,
    "replaces": REPLACE,
    "contacts_customer:email": EMAIL,
    "contacts_customer:phone": PHONE,
}

_DONE = r"(?:has|have|had|was|were|is|are|'s)\s+(?:now\s+|already\s+|just\s+|successfully\s+|been\s+|fully\s+)*"
_SPAN = r"(?:[^.!?]|\.\d)"  # within one sentence; a decimal point (129.99) does not end it
_WE = r"\b(?:i|we)(?:'ve|\s+have|\s+had)?\s+(?:now\s+|just\s+|already\s+|successfully\s+|gone ahead and\s+)*"
_CLAIMS = {
    REFUND: re.compile(
        r"\brefunds?\b"
        + _SPAN
        + r"{0,60}?\b"
        + _DONE
        + r"(?:issued|processed|sent|completed|approved|made|credited|paid|given|granted|provided|applied"
        r"|refunded|initiated|released|recorded|registered|logged|entered|noted)\b"
        r"|"
        + _WE
        + r"(?:(?:issued|processed|sent|made|initiated|completed|released)\s+(?:you\s+)?(?:a|an|the|your)?\s*"
        r"(?:[\w.]+\s+){0,3}?refund|refunded)\b"
        r"|\b(?:been|was|were)\s+(?:fully\s+|partially\s+)?refunded\b|\bcredited back\b",
        re.I,
    ),
    CANCEL: re.compile(
        r"\bcancell?ed\b|\bcancellation\b"
        + _SPAN
        + r"{0,40}?\b"
        + _DONE
        + r"(?:complete|completed|confirmed|processed|done|recorded|registered|logged|entered|noted)\b",
        re.I,
    ),
    RETURN: re.compile(
        r"\breturn\b" + _SPAN + r"{0,50}?\b" + _DONE + r"(?:booked|created|started|opened|initiated|arranged|set up"
        r"|registered|processed|logged|approved|scheduled|recorded|entered)\b"
        r"|" + _WE + r"(?:booked|created|started|opened|initiated|arranged|set up|registered|processed|logged"
        r"|scheduled)\s+(?:a|the|your|an)\s+(?:\w+\s+)?return\b",
        re.I,
    ),
    REPLACE: re.compile(
        r"\b(?:replacement|exchange)\b"
        + _SPAN
        + r"{0,50}?\b"
        + _DONE
        + r"(?:sent|shipped|arranged|placed|booked|created"
        r"|dispatched|processed|issued|ordered|on its way|recorded|registered|logged|entered)\b"
        r"|"
        + _WE
        + r"(?:sent|shipped|arranged|placed|booked|dispatched|ordered|issued)\s+(?:you\s+)?(?:a|an|the|your)\s+"
        r"(?:\w+\s+)?(?:replacement|exchange)\b|\b(?:been|was|were)\s+(?:replaced|exchanged)\b",
        re.I,
    ),
    EMAIL: re.compile(
        r"" + _WE + r"(?:sent|e-?mailed|emailed|forwarded|written)\s+(?:it\s+to\s+)?(?:you\s+)?(?:an?\s+|the\s+)?"
        r"(?:\w+\s+)?(?:e-?mail|email)\b"
        r"|" + _WE + r"e-?mailed\s+(?:you|it|the)\b"
        r"|\b(?:an?|the|your)\s+(?:\w+\s+)?e-?mail\b"
        + _SPAN
        + r"{0,30}?\b"
        + _DONE
        + r"(?:sent|delivered|on its way)\b",
        re.I,
    ),
    PHONE: re.compile(
        r"" + _WE + r"(?:called|phoned|rang|telephoned)\s+you\b"
        r"|\b(?:a|the|your)\s+(?:phone\s+)?call\b" + _SPAN + r"{0,30}?\b" + _DONE + r"(?:logged|made|placed|noted)\b",
        re.I,
    ),
}
# A sentence that promises, asks, denies or sets a condition states nothing done.
_NOT_DONE = re.compile(
    r"\b(?:not|never|no|none|nothing|neither|nor|cannot|unable|will|would|could|can|shall|should|may|might|must|once|if|unless"
    r"|until|whether|going to|about to|to be|yet|want|wants|wish|need|needs|awaiting|eligible|able"
    r"|instead|rather)\b|n't\b|'ll\b|'d\b",
    re.I,
)
# What a ledger entry's status words say was done to it (from a tool result, never from the model).
_STATUS = {
    REFUND: re.compile(r"\brefund", re.I),
    CANCEL: re.compile(r"\bcancel", re.I),
    RETURN: re.compile(r"\breturn", re.I),
    REPLACE: re.compile(r"\b(?:replac|exchang)", re.I),
    EMAIL: re.compile(r"(?!)"),  # a contact leaves no status on a record: only its action backs it
    PHONE: re.compile(r"(?!)"),
}


# An amount as a reply writes it: "48.99 USD", "USD 48.99", "$48.99", "€20", "1,299.00 INR", "20 euros",
# or a bare "48.99" (two decimals: a price, not a count or a date). A symbol or a word stands for its
# currency; "$", "dollars" and a bare figure for any, so only the figure is compared.
_SYMBOL = {"$": "", "€": "EUR", "£": "GBP", "₹": "INR", "¥": "JPY"}
_WORD = {
    "dollar": "",
    "dollars": "",
    "euro": "EUR",
    "euros": "EUR",
    "pound": "GBP",
    "pounds": "GBP",
    "rupee": "INR",
    "rupees": "INR",
    "yen": "JPY",
}
_FIGURE = r"(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
_AMOUNT = re.compile(
    r"(?:\b([A-Z]{3})\s?|([$€£₹¥])\s?)" + _FIGURE + r"(?![\d.,]*\d)"
    r"|(?<![\w.,])" + _FIGURE + r"\s?(?:([A-Z]{3})\b|(" + "|".join(_WORD) + r")\b)"
    r"|(?<![\w.,$€£₹¥])(\d{1,3}(?:,\d{3})*\.\d{2}|\d+\.\d{2})(?![\d.,]*\d)"
)


@dataclass(frozen=True)
class Amount:
    value: Decimal
    currency: str  # "" when only a dollar sign or "dollars" said it

    def minor(self, currency: str) -> int | None:
        """The amount in `currency`'s minor units, or None where the currency differs or cannot hold it."""
        if self.currency and currency and self.currency != currency.upper():
            return None
        try:
            scaled = self.value.scaleb(exponent(currency or self.currency or "USD"))
        except MoneyError:
            return None
        return int(scaled) if scaled == scaled.to_integral_value() else None

    def __str__(self) -> str:
        return f"{self.value} {self.currency}".strip()


def amounts_in(sentence: str) -> list[Amount]:
    out = []
    for m in _AMOUNT.finditer(sentence):
        code, symbol, figure, figure2, code2, word, bare = m.groups()
        if (code and code not in CODES) or (code2 and code2 not in CODES):
            continue  # "2 USB cables": a count and a word, not money
        try:
            value = Decimal((figure or figure2 or bare).replace(",", ""))
        except InvalidOperation:
            continue
        currency = code or code2 or (_SYMBOL[symbol] if symbol else _WORD[word.lower()] if word else "")
        out.append(Amount(value, currency))
    return out


DONE = "done"
PENDING, FUTURE, REFUSED, DENIED = claimmodes.PENDING, claimmodes.FUTURE, claimmodes.REFUSED, claimmodes.DENIED
OFFER = claimmodes.OFFER
AGREED = confirmclaims.AGREED  # "the customer has confirmed the refund": judged on confirmed cards
ANY = bareclaims.ANY  # an action the reply names nowhere (`bareclaims`)
READY = bareclaims.READY  # the same, said ready ("you're all set"): judged only on an open card
STATED = statusclaims.STATED  # a record's status, date or figure stated (`statusclaims`): judged on the records
IDENTITY = identityclaims.IDENTITY  # what an identifier is, stated (`identityclaims`): judged on the ledger


@dataclass(frozen=True)
class Claim:
    kind: str
    sentence: str
    ids: frozenset[str]
    amounts: tuple[Amount, ...] = ()
    mode: str = DONE  # or PENDING, FUTURE, REFUSED, DENIED, OFFER (`claimmodes`), AGREED (`confirmclaims`)
    why: str = ""  # set by `unsupported`: what the records say against it
    # for STATED: what the sentence states (an `identityclaims.Identity` for kind IDENTITY)
    stated: statusclaims.Statement | identityclaims.Identity | None = None


def _done_kinds(s: str, vocab: claimverbs.Vocabulary) -> list[str]:
    builtin = [kind for kind, pattern in _CLAIMS.items() if pattern.search(s)]
    return builtin + _own_words(vocab.done_kinds(s) if vocab else [], builtin, vocab)


def _own_words(found: list[str], builtin: list[str], vocab: claimverbs.Vocabulary) -> list[str]:
    """A write's own claim words, unless the sentence's claim of one of the six kinds covers its tools."""
    return [k for k in found if k not in builtin and not vocab.read_already(k, set(builtin))]


def claims_of(
    text: str,
    question: str = "",
    vocab: claimverbs.Vocabulary = claimverbs.EMPTY,
    since: int = 0,
    nouns: identityclaims.Nouns = identityclaims.EMPTY,
) -> list[Claim]:
    """Each sentence that speaks of an action of a known kind as done, pending, refused, to come, not
    done or offered, with its mode. `question`: the customer's latest message; a sentence that opens
    with a bare yes or no to "did you refund <order>?" claims (or denies) that refund, on the records
    the question names, and a claim that names no action ("It's done.") is of the action the reply or
    the message names (`bareclaims`). `vocab`: the domain's writes' own claim words (`vocabulary_of`).
    `since`: the sentences before this one are read only as what later ones may speak of (the stream
    judged them already). `nouns`: the domain's names for its ID kinds (`identityclaims.nouns_of`), for
    what a sentence says an identifier is."""
    out = []
    pieces = sentences(text or "", final=True)
    said = [sentence.strip().replace("\u2019", "'") for sentence in pieces]
    listed = _listed(text or "", pieces, vocab)
    for i, s in enumerate(said):  # models write "you’ll" as often as "you'll"
        if i in listed:
            # An item of a list whose lead-in says what became of it (`claimlists`): read in the lead-in's mode.
            if i >= since:
                out += [
                    Claim(
                        kind,
                        f"{item.lead} {item.text}",
                        frozenset(id_tokens(item.text)),
                        _amounts(kind, item.text),
                        item.mode,
                    )
                    for item in listed[i]
                    for kind in item.kinds
                ]
                # What an item states of the record ("- order status: delivered"), the lead-in naming it.
                out += [
                    c
                    for item in listed[i]
                    for c in _stated(item.text, [], about=f"{item.lead} {item.text}", nouns=nouns)
                ]
            lead = next((item.lead for item in listed[i] if item.inline), None)
            if lead is None:
                continue
            s = lead  # an inline list's lead-in is a sentence too ("I've refunded 5.00 USD and did this: …")
        if not s or i < since:
            continue
        # What the customer is said to have confirmed, whatever else the sentence says of the action.
        found = [
            Claim(kind, s, frozenset(id_tokens(s)), _amounts(kind, s), AGREED)
            for kind in confirmclaims.confirmed_actions(s)
        ]
        # A request to confirm the action on its card tells the customer the card is there.
        found += [
            Claim(kind, s, frozenset(id_tokens(s)), _amounts(kind, s), PENDING)
            for kind in confirmclaims.requested_on_card(s)
        ]
        # Handed over in the sentence itself ("Here is your full refund for <order>:"): given now, so done.
        found += [Claim(kind, s, frozenset(id_tokens(s)), _amounts(kind, s), DONE) for kind in presentclaims.kinds(s)]
        answer = bareclaims.answered(s, question, vocab)
        if answer is not None:
            mode, kinds, asked = answer
            found += [
                Claim(kind, f"{s} (to: {asked.strip()})", frozenset(id_tokens(asked)), (), mode) for kind in kinds
            ]
        rest = claimmodes.offer_rest(s)
        offered = claimmodes.offered_kinds(rest) if rest is not None else []
        if rest is not None and vocab:
            offered += _own_words(vocab.offered(rest), offered, vocab)
        kinds: list[str] = []
        if offered:
            mode, kinds = OFFER, offered
        elif s.endswith("?"):
            out += found + _stated(
                s, found, nouns=nouns
            )  # a statement run on into a question ("… 2021-08-22 Does this help?")
            continue
        else:
            mode = claimmodes.mode_of(s, lambda plain: bool(_done_kinds(plain, vocab)))
            if mode is not None:
                kinds = claimmodes.kinds_in(s, mode, has_amount=lambda sentence: bool(amounts_in(sentence)))
                if vocab:
                    kinds += _own_words(vocab.mentioned(s, promised=mode == FUTURE), kinds, vocab)
            elif not _NOT_DONE.search(s):
                mode, kinds = DONE, _done_kinds(s, vocab)
        found += [
            claim
            for kind in kinds
            if (claim := Claim(kind, s, frozenset(id_tokens(s)), _amounts(kind, s), mode)) not in found
        ]
        if rest is None and not claimmodes.asks_or_offers(s):
            # The action as the object of our verb: "we will record the refund", "I'm processing your return".
            promised = objectpromises.promised_kinds(s, vocab)
            six = [k for k in promised if k in KINDS] + [c.kind for c in found if c.kind in KINDS]
            said_of = {c.kind for c in found}
            found += [
                Claim(kind, s, frozenset(id_tokens(s)), _amounts(kind, s), FUTURE)
                for kind in [k for k in promised if k in KINDS] + _own_words(promised, six, vocab)
                if kind not in said_of
            ]
        if not offered:
            found += _unnamed(s, said[:i], question, vocab, rest, {(c.kind, c.mode) for c in found})
        out += found + _stated(s, found, nouns=nouns)
    return out


def _stated(s: str, found: list[Claim], about: str = "", nouns=identityclaims.EMPTY) -> list[Claim]:
    """The record's status, dates and figures the sentence states (`statusclaims`); a figure only where
    no claim of an action took the sentence already (a refund's amount is judged with the refund); and
    what it says its identifiers are (`identityclaims`, in the domain's words `nouns`).
    `about`: the words that say which record it is of (a list item's lead-in and the item; default `s`)."""
    about = about or s
    out = []
    for st in statusclaims.statements(s):
        amounts = tuple(amounts_in(s)) if st.what == statusclaims.AMOUNT else ()
        if st.what == statusclaims.AMOUNT and (found or not amounts):
            continue
        out.append(Claim(st.what, about, frozenset(id_tokens(about)), amounts, STATED, stated=st))
    for said in identityclaims.statements(s, nouns):
        out.append(Claim(identityclaims.IDENTITY, about, frozenset(id_tokens(about)), (), STATED, stated=said))
    return out


def _listed(text: str, pieces: list[str], vocab) -> dict[int, list]:
    """Sentence index → the list items (`claimlists.Item`) that end in it; every sentence inside such an
    item ("1." and what follows it) maps to a list, empty but for the item's last sentence."""
    found = claimlists.items(text, vocab)
    if not found:
        return {}
    out: dict[int, list] = {}
    at = 0
    for i, piece in enumerate(pieces):
        start, end = at, at + len(piece.rstrip())
        at += len(piece)
        for item in found:
            if item.start <= start and end <= item.end + 1 and piece.strip():
                out.setdefault(i, [])
                if end >= item.end:
                    out[i].append(item)
    return out


def _amounts(kind: str, sentence: str) -> tuple[Amount, ...]:
    return tuple(amounts_in(sentence)) if kind == REFUND else ()


def _unnamed(s: str, before: list[str], question: str, vocab, rest: str | None, seen: set) -> list[Claim]:
    """Claims in words that need not name the action (`bareclaims`): of the action the clause names,
    else of the one the reply named last before it, else the customer's message's, else of `ANY`."""
    conditional = bool(claimmodes.asks_or_offers(s))
    out = []
    for reading in bareclaims.readings(s, offer_rest=rest, conditional=conditional):
        kinds, ids, about = bareclaims.named_kinds(reading.clause, vocab), id_tokens(s), ""
        if not kinds and not reading.unnamed:
            continue  # "your order has been processed": a record's status, no action
        if not kinds:
            for said in [s[: reading.at], *reversed(before), question]:
                kinds = bareclaims.named_kinds(said, vocab)
                if kinds:
                    ids, about = ids or id_tokens(said), said.strip()
                    break
            else:
                kinds = [READY if reading.weak else ANY]
        sentence = f"{s} (of: {about})" if about else s
        for kind in kinds:
            if (kind, reading.mode) not in seen:
                seen.add((kind, reading.mode))
                out.append(Claim(kind, sentence, frozenset(ids), _amounts(kind, s), reading.mode))
    return out


def claims_in(text: str) -> list[Claim]:
    """Each sentence that states an action of a known kind as done."""
    return [c for c in claims_of(text) if c.mode == DONE]


def kinds_of(decls: dict) -> dict[str, set[str]]:
    """Tool name → the kinds of action it performs, from the declaration (`tooling.domain.ToolDecl`): the
    six kinds its capabilities, consent and money say, and its own claim words' (`claimverbs`)."""
    out = _builtin_kinds_of(decls)
    for name, kinds in vocabulary_of(decls).kinds_by_tool.items():
        out[name] = out.get(name, set()) | kinds
    return out


def vocabulary_of(decls: dict) -> claimverbs.Vocabulary:
    """The claim words of a domain's writes (`claimverbs`), built once per set of declarations."""
    return claimverbs.vocabulary(decls, _builtin_kinds_of(decls))


def _builtin_kinds_of(decls: dict) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for name, decl in decls.items():
        kinds = {_CAPABILITY_KIND[c] for c in getattr(decl, "capabilities", []) or [] if c in _CAPABILITY_KIND}
        if getattr(decl, "consent", None):
            kinds.add(decl.consent)
        if getattr(decl, "refund", None) is not None or any(
            getattr(m, "kind", "") == "refund" for m in getattr(decl, "money", []) or []
        ):
            kinds.add(REFUND)
        if kinds:
            out[name] = kinds
    return out


OPEN, DECLINED, CONFIRMED = "open", "declined", "confirmed"


@dataclass(frozen=True)
class Proposal:
    """An action proposed but not run: a confirmation card, or a call held for staff (`proposals`)."""

    tool: str
    on: tuple[str, ...]  # every plain value its arguments name
    status: str  # OPEN: awaiting the customer's confirmation or staff; DECLINED: declined, rejected or refused;
    # CONFIRMED: a card confirmed (by the customer or staff on their behalf) that ran or awaits staff
    amount_cents: int | None = None
    currency: str = ""
    confirmed: bool = False  # a card someone confirmed (also when its re-check then refused it: DECLINED)


def forbidden_kinds(rules: Iterable, domain, overridden: Iterable[int] = ()) -> dict[str, frozenset[str]]:
    """Kind of action → the records the rules in force forbid it on (empty: everywhere), where they
    forbid every tool whose declaration says it does that (a rule against refunds leaves a cancellation
    that refunds alone, and forbids "I can refund …"). Read as the rules guard reads rules: as stored,
    and their text again against `domain`'s tools. `rules`: `RuleData`; `overridden`: ids of rules a
    confirmed card quoted (the customer confirmed the call anyway)."""
    blocked: dict[str, frozenset[str]] = {}
    skip = set(overridden)
    for rule in rules:
        if rule.id in skip:
            continue
        for check in (rule.enforcement or {}, infer_enforcement(rule.text, domain)):
            only_on = frozenset(str(v) for v in check.get("only_on") or ())
            for tool in check.get("block_tools") or ():
                narrowed = bool(only_on) and tool in check.get("narrowed_tools", ())
                if not narrowed or blocked.get(tool) == frozenset():
                    blocked[tool] = frozenset()
                else:
                    blocked[tool] = blocked.get(tool, frozenset()) | only_on
    if not blocked:
        return {}
    # What each tool is for, by its capabilities and consent (not by money its result moves).
    purpose = {
        name: {_CAPABILITY_KIND[c] for c in getattr(decl, "capabilities", []) or [] if c in _CAPABILITY_KIND}
        | ({decl.consent} if getattr(decl, "consent", None) else set())
        | ({REFUND} if getattr(decl, "refund", None) is not None else set())
        for name, decl in domain.tools.items()
    }
    for name, kinds in vocabulary_of(domain.tools).kinds_by_tool.items():
        purpose[name] = purpose.get(name, set()) | kinds
    out: dict[str, frozenset[str]] = {}
    for kind in set().union(*purpose.values()):
        tools = [t for t, kinds in purpose.items() if kind in kinds]
        if all(t in blocked for t in tools):
            on = [blocked[t] for t in tools]
            out[kind] = frozenset() if any(not o for o in on) else frozenset().union(*on)
    return out


def later_kinds_of(decls: dict) -> dict[str, set[str]]:
    """`kinds_of`, with what follows later from each tool's call (its declaration's `then`: a return
    that refunds once the item arrives) — what a promise may stand on."""
    out = {name: set(kinds) for name, kinds in kinds_of(decls).items()}
    for name, decl in decls.items():
        later = {_CAPABILITY_KIND[c] for c in getattr(decl, "then", []) or [] if c in _CAPABILITY_KIND}
        if later:
            out[name] = out.get(name, set()) | later
    return out


def unsupported(
    text: str,
    *,
    actions: Iterable,
    kinds: dict[str, set[str]],
    money: Iterable = (),
    ledger: Iterable = (),
    owner_kind: str = "order",
    proposals: Iterable = (),
    later: dict[str, set[str]] | None = None,
    question: str = "",
    vocab: claimverbs.Vocabulary = claimverbs.EMPTY,
    forbidden: dict[str, frozenset[str]] | None = None,
    since: int = 0,
    targets: dict[str, str] | None = None,
    kind_of: Callable[[str], str | None] | None = None,
    states: Iterable | None = None,
    shown: str = "",
    today: tuple | Callable[[], tuple] = (),
    nouns: identityclaims.Nouns = identityclaims.EMPTY,
) -> list[Claim]:
    """The claims in `text` the records do not support, each with why (`Claim.why`). `actions`:
    `ActionData`; `money`: `MoneyData`; `ledger`: `LedgerData`; `proposals`: `Proposal` (open and
    declined cards and holds). Kinds the domain has no tool for are not judged: nothing could back them
    (an offer of one is held: nothing could do it).

    Done: an action of its kind ran (on the record it names), for the figure it names. Pending or future:
    such an action ran, or a card or hold for it is open. Refused: a card or hold for it was declined.
    Denied ("nothing was cancelled"): no such action ran. Offered: see the module docstring. `later`
    (`later_kinds_of`): what a call's action leads to afterwards, which a pending or promised claim may
    stand on (default: `kinds`). `question`: the customer's latest message, which a bare yes or no
    answers (`claims_of`). `vocab`: the writes' own claim words (`vocabulary_of`). `forbidden`: kind →
    the records a rule in force forbids it on (`forbidden_kinds`). `since`: judge the sentences from
    this one on, the earlier ones read only as what they may speak of (`claims_of`). `targets`
    (`targets_of`): tool → the kind of record it acts on; `kind_of`: an identifier's kind by the
    domain's ID patterns — with them a claim is judged on the records of the kind it names
    (`_entity`). `states`: the records' statuses, dates and figures now (`RecordState`; None: the
    domain states none, and statements of them are not judged); `shown`: the tool results the model
    was shown, whose statuses, dates and figures back a statement too; `today`: the reply's day (in the
    shop's time zone and in UTC), or a function giving it when first needed, which a time said relative
    to the reply ("it shipped 15 days ago") counts from — none given, such a time is not judged. `nouns`
    (`identityclaims.nouns_of`): the domain's names for its ID kinds; with them, a sentence saying an
    identifier is of a kind the ledger does not give it is false."""
    later = later if later is not None else kinds
    forbidden = forbidden or {}
    declared_now = set().union(*kinds.values()) if kinds else set()
    declared = declared_now.union(*later.values())
    actions, money, ledger, proposals = list(actions), list(money), list(ledger), list(proposals)
    owners = (
        {e.value for e in ledger if e.kind == owner_kind}
        | {a.target for a in actions if a.target}
        | {m.order for m in money}
        | {v for p in proposals for v in p.on}
    )
    # A write's own kinds act on records of any kind (a reservation, a line): every value on the ticket.
    anything = owners | {e.value for e in ledger} | {v for a in actions for v in a.on}
    out = []
    for claim in _resolved(claims_of(text, question, vocab, since, nouns), proposals, later):
        if claim.kind == READY:
            continue  # no card open: "you're all set" may close the customer's own troubleshooting
        if claim.kind == ANY:
            # Nothing names the action and no card or hold is open: "it's done" stands on anything done on
            # the ticket. Any other mode is left alone: "we'll get this sorted out!" may be the customer's own
            # troubleshooting, and there is no action to hold a promise or a denial to.
            if claim.mode == DONE and not actions:
                out.append(replace(claim, why="nothing was done on this ticket"))
            continue
        own = claim.kind not in KINDS
        if claim.kind == identityclaims.IDENTITY:
            why = identityclaims.fault(claim.stated, ledger, money, owner_kind, nouns)
            if why:
                out.append(replace(claim, why=why))
            continue
        if claim.mode == STATED:
            why = _stated_fault(claim, states, shown, ledger, actions, proposals, money, today)
            if why:
                out.append(replace(claim, why=why))
            continue
        if claim.mode == AGREED:
            why = _agreed_fault(claim, owners, actions, proposals, ledger, kinds, money, targets or {}, kind_of)
            if why:
                out.append(replace(claim, why=why))
            continue
        if claim.mode == OFFER:
            why = _offer_fault(
                claim,
                claim.ids & (anything if own else owners) or None,
                declared_now,
                actions,
                kinds,
                money,
                ledger,
                proposals,
                forbidden,
                owner_kind,
            )
            if why:
                out.append(replace(claim, why=why))
            continue
        if claim.kind not in (declared if claim.mode in (PENDING, FUTURE) else declared_now):
            continue
        # A contact is with the customer, not on an order: any e-mail (call) on the ticket backs "I've e-mailed you".
        if own or claim.kind in (EMAIL, PHONE):
            named = (set() if claim.kind in (EMAIL, PHONE) else claim.ids & anything) or None
            acts, props, entries = actions, proposals, ledger
        else:
            named, acts, props, entries = _entity(
                claim,
                owners,
                actions,
                proposals,
                ledger,
                later if claim.mode in (PENDING, FUTURE) else kinds,
                targets or {},
                kind_of,
            )
        ran = _backed(claim.kind, named, acts, kinds, money, entries, vocab)
        if claim.mode == DENIED:
            if ran:
                out.append(replace(claim, why="it ran"))
        elif claim.mode == REFUSED:
            if not _proposed(claim.kind, named, props, kinds, DECLINED):
                out.append(replace(claim, why="no card or hold for it was declined"))
        elif claim.mode == DONE:
            if not ran:
                out.append(replace(claim, why="no tool did it"))
            elif claim.amounts and not _amounts_backed(claim.amounts, named, acts, kinds, money):
                out.append(replace(claim, why="the records show another figure"))
        else:  # PENDING, FUTURE
            if claim.kind in (EMAIL, PHONE) and claim.mode == FUTURE:
                ran = False  # a contact made before promises no new one
            else:
                ran = ran or _backed(claim.kind, named, acts, later, money, entries, vocab)
            offered = _proposed(claim.kind, named, props, later, OPEN)
            if not offered and _forbidden(claim.kind, named, forbidden):
                out.append(replace(claim, why="a rule in force forbids it"))
            elif not (ran or offered):
                out.append(replace(claim, why="no card or staff hold is open for it"))
            elif claim.amounts and not (
                (ran and _amounts_backed(claim.amounts, named, acts, later, money))
                or _amounts_offered(claim.amounts, named, offered, money)
            ):
                out.append(replace(claim, why="its card or the records show another figure"))
    return out


# A status a tool result gives: `"status": "in_transit"`, `"order_status": "delivered"`.
_STATUS_FIELD = re.compile(r'"\w*status"\s*:\s*"([^"]{1,40})"', re.I)


def _stated_fault(claim, states, shown, ledger, actions, proposals, money, today=()) -> str:
    """Why a stated status, date or figure is not so ("" when it is): judged on the record the sentence
    names, else on any of the ticket's (`statusclaims.fault`)."""
    if callable(states):
        states = states()
    if states is None:
        return ""
    states = list(states)
    named = statusclaims.references(claim.sentence) & {r.reference.upper() for r in states}
    about = [r for r in states if r.reference.upper() in named] or states
    refs = {r.reference.upper() for r in about}
    told = " ".join(
        f"{e.description} {e.note}"
        for e in ledger
        if e.value.upper() in refs or any(ref in f"{e.description} {e.note}".upper() for ref in refs) or not states
    )
    # A tool result's own status ("status": "in_transit") backs a statement about the records it names;
    # when the sentence names none and no record is known, any result shown may.
    named_refs = refs or statusclaims.references(claim.sentence)
    # Only a status field counts: "cannot be cancelled" in an error is no status.
    told += " " + " ".join(
        v.replace("_", " ")
        for r in shown.split(statusclaims.RESULT_BREAK)
        if not named_refs or any(x in r.upper() for x in named_refs)
        for v in _STATUS_FIELD.findall(r)
    )
    statuses = {k for k, p in statusclaims._STATUS_WORDS.items() if re.search(r"\b(?:" + p + r")\b", told, re.I)}
    st = claim.stated
    if st.what == statusclaims.STATUS and statusclaims.is_other(st.value):
        # A status the shop's records never have stands only on a tool result's status field saying that very
        # word, about the records the sentence names; told of a reference no record of the ticket is (a
        # refund's, a return's), it is not judged here.
        if st.of and st.of not in {r.reference.upper() for r in states}:
            return ""
        statuses = {
            re.sub(r"[\s_-]+", " ", v.strip().lower()).replace("authorized", "authorised")
            for r in shown.split(statusclaims.RESULT_BREAK)
            if not named_refs or any(x in r.upper() for x in named_refs)
            for v in _STATUS_FIELD.findall(r)
        }
    figures = {(a.amount_cents, a.currency) for a in actions if a.amount_cents}
    figures |= {(p.amount_cents, p.currency) for p in proposals if p.amount_cents}
    figures |= {(c, m.currency) for m in money for c in (m.paid_cents, m.refunded_cents, m.refundable_cents) if c}
    if callable(today):
        today = today()
    return statusclaims.fault(claim.stated, about, shown, statuses, figures, claim.amounts, today)


def _agreed_fault(claim, owners, actions, proposals, ledger, kinds, money, targets, kind_of) -> str:
    """Why "the customer confirmed <action>" is false ("" when it is not): no card for a call of that
    action was confirmed (by the customer or by staff on their behalf), on the record the claim names,
    for the figure it names. An action that ran without a card had no confirmation."""
    named, _acts, props, _entries = _entity(claim, owners, actions, proposals, ledger, kinds, targets, kind_of)
    confirmed = [
        p for p in props if p.confirmed and claim.kind in kinds.get(p.tool, ()) and (named is None or named & set(p.on))
    ]
    if not confirmed:
        return "no card for it was confirmed"
    if claim.amounts and not _amounts_offered(claim.amounts, named, confirmed, money):
        return "its confirmed card shows another figure"
    return ""


def _entity(claim, owners, actions, proposals, ledger, kinds, targets, kind_of):
    """(the records the claim names, and the actions, cards and ledger entries that may back it) for a
    claim of one of the six kinds. The records it names are the ticket's owners and any identifier of a
    kind the tools of its kind act on (`targets`; by the ledger, else the domain's ID patterns): "your
    reservation 8JX2WO has been cancelled" is judged on 8JX2WO though the domain's owner kind is not
    reservations. When the claim names such a kind — by an identifier of it or by the kind's own word
    ("your booking has been cancelled") — only the tools that act on that kind back it, so a booking's
    cancellation is not backed by an appointment's."""
    tools = {t for t, ks in kinds.items() if claim.kind in ks}
    acted_on = {targets[t] for t in tools if t in targets}
    kind_by_value = {e.value: e.kind for e in ledger}

    def kind(value: str) -> str | None:
        return kind_by_value.get(value) or (kind_of(value) if kind_of else None)

    named = claim.ids & (owners | {v for v in claim.ids if kind(v) in acted_on}) or None
    said = {k for k in acted_on if re.search(r"\b" + re.escape(k.replace("_", " ")) + r"s?\b", claim.sentence, re.I)}
    said |= {kind(v) for v in named or ()} & acted_on
    if not said or said == acted_on:
        return named, actions, proposals, ledger
    allowed = {t for t in tools if targets.get(t) in said}
    return (
        named,
        [a for a in actions if a.tool in allowed],
        [p for p in proposals if p.tool in allowed],
        [e for e in ledger if e.kind in said],
    )


def targets_of(decls: dict) -> dict[str, str]:
    """Tool name → the kind of record it acts on: its declared target argument's kind."""
    out = {}
    for name, decl in decls.items():
        args, target = getattr(decl, "args", {}) or {}, getattr(decl, "target", None)
        kind = (args.get(target) or args.get(f"{target}[]")) if target else None
        if kind:
            out[name] = kind
    return out


def _resolved(claims: list[Claim], proposals: list, kinds: dict[str, set[str]]) -> list[Claim]:
    """Claims of `ANY` action made of the open cards' and holds' (the action under discussion when
    neither the reply nor the customer's message names one); the rest as they are."""
    open_ = [p for p in proposals if p.status == OPEN]
    out = []
    for claim in claims:
        if claim.kind not in (ANY, READY) or not open_:
            out.append(claim)
            continue
        made = [
            replace(claim, kind=k, ids=claim.ids | frozenset(p.on))
            for p in open_
            for k in sorted(kinds.get(p.tool, ()))
        ]
        out += made or [claim]
    return list(dict.fromkeys(out))


def _offer_fault(claim: Claim, named, declared, actions, kinds, money, ledger, proposals, forbidden, owner_kind) -> str:
    """Why an offer of an action is not the customer's to take ("" when it is)."""
    if claim.kind not in declared:
        return "no tool of this desk does it"
    open_ = _proposed(claim.kind, named, proposals, kinds, OPEN)
    if not open_ and _forbidden(claim.kind, named, forbidden):
        return "a rule in force forbids it"
    if not open_ and _proposed(claim.kind, named, proposals, kinds, DECLINED):
        return "its card or hold was declined"
    if claim.kind == CANCEL and _done_on_all(claim.kind, named, actions, kinds, money, ledger, owner_kind):
        return "it is done already"
    if claim.kind == REFUND:
        lanes = [m for m in money if named is None or m.order in named]
        if lanes and all(m.refundable_cents == 0 for m in lanes):
            return "nothing is left to refund"
        figures = [(p.amount_cents, p.currency) for p in open_ if p.amount_cents is not None]
        if claim.amounts and figures:
            if not any(a.minor(c) == cents for a in claim.amounts for cents, c in figures):
                return "its open card names another figure"
        elif claim.amounts and named and lanes:
            if not any(
                a.minor(m.currency) is not None and a.minor(m.currency) <= m.refundable_cents
                for a in claim.amounts
                for m in lanes
            ):
                return "more than is left to refund"
    return ""


def _done_on_all(kind, named, actions, kinds, money, ledger, owner_kind) -> bool:
    """Whether the action ran on the record the offer names — or, naming none, on every record of the
    ticket it could mean (one of two orders cancelled leaves "I can cancel it" open for the other)."""
    if named is not None:
        return _backed(kind, named, actions, kinds, money, ledger)
    records = {e.value for e in ledger if e.kind == owner_kind}
    if not records:
        return _backed(kind, None, actions, kinds, money, ledger)
    return all(_backed(kind, {r}, actions, kinds, money, ledger) for r in records)


def _forbidden(kind: str, named: set[str] | None, forbidden: dict[str, frozenset[str]]) -> bool:
    """Whether a rule in force forbids `kind` (on the record named, if the rule names records)."""
    if kind not in forbidden:
        return False
    only = forbidden[kind]
    return not only or (named is not None and bool(named & only))


def _proposed(kind: str, named: set[str] | None, proposals, kinds, status: str) -> list[Proposal]:
    """The proposals in `status` of an action of `kind` (on one of `named`, when the claim names any)."""
    return [
        p
        for p in proposals
        if p.status == status and kind in kinds.get(p.tool, ()) and (named is None or named & set(p.on))
    ]


def _amounts_offered(amounts, named: set[str] | None, offered: list[Proposal], money) -> bool:
    """A promised figure is an open card's or hold's amount; one that names none moves what its order
    has left to refund (a cancellation's), or — where no record holds a figure — cannot be compared."""
    figures = []
    for p in offered:
        if p.amount_cents is not None:
            figures.append((p.amount_cents, p.currency))
            continue
        lane = [m for m in money if m.order in p.on]
        if not lane:
            return True
        figures += [(m.refundable_cents, m.currency) for m in lane] + [(m.paid_cents, m.currency) for m in lane]
    return any(any(a.minor(currency) == cents for cents, currency in figures) for a in amounts)


def _amounts_backed(amounts, named: set[str] | None, actions, kinds, money) -> bool:
    """A refund's figure is one the records show refunded: one refund action's amount, all refund actions
    on an order together, or what the money lane shows refunded on it. At least one of the sentence's
    amounts must be such a figure; any other may be what the order was paid ("20.00 of the 129.99")."""

    def on(values) -> bool:
        return named is None or any(v in named for v in values)

    refunded: list[tuple[int, str]] = []
    per_order: dict[tuple[str, str], int] = {}
    lane = {m.order for m in money if m.refunded_cents > 0}
    for a in actions:
        if REFUND not in kinds.get(a.tool, ()) or not on((a.target, *a.on)):
            continue
        if a.amount_cents is None:
            if not lane & {a.target, *a.on}:
                return True  # a refund whose figure no record holds (no declared money): nothing to compare
            continue
        refunded.append((a.amount_cents, a.currency))
        per_order[(a.target, a.currency)] = per_order.get((a.target, a.currency), 0) + a.amount_cents
    refunded += [(cents, currency) for (_order, currency), cents in per_order.items()]
    refunded += [(m.refunded_cents, m.currency) for m in money if m.refunded_cents > 0 and on((m.order,))]
    paid = [(m.paid_cents, m.currency) for m in money if on((m.order,))]

    def shown(amount: Amount, figures) -> bool:
        return any(amount.minor(currency) == cents for cents, currency in figures)

    return any(shown(a, refunded) for a in amounts) and all(shown(a, refunded + paid) for a in amounts)


def _backed(kind: str, named: set[str] | None, actions, kinds, money, ledger, vocab=claimverbs.EMPTY) -> bool:
    """Whether the records show an action of `kind` — on one of `named`, or anywhere on the ticket when
    the claim names no record (a claim that names an order is judged on that order)."""

    def on(value: str) -> bool:
        return named is None or value in named

    if any(kind in kinds.get(a.tool, ()) and (on(a.target) or any(on(v) for v in a.on)) for a in actions):
        return True
    if kind == REFUND and any(m.refunded_cents > 0 and on(m.order) for m in money):
        return True
    status = _STATUS.get(kind) or vocab.status_by_kind.get(kind)
    return status is not None and any(on(e.value) and status.search(f"{e.description} {e.note}") for e in ledger)


@dataclass(frozen=True)
class Records:
    """What a ticket's records show was done, as one step (or one guard) read them."""

    actions: tuple = ()  # ActionData
    kinds: dict = field(default_factory=dict)  # tool name -> kinds of action it performs (`kinds_of`)
    money: tuple = ()  # MoneyData
    ledger: tuple = ()  # LedgerData
    owner_kind: str = "order"
    proposals: tuple = ()  # Proposal: open and declined cards and holds, read once per step
    later: dict | None = None  # `later_kinds_of`
    vocab: claimverbs.Vocabulary = claimverbs.EMPTY  # `vocabulary_of`
    forbidden: dict = field(default_factory=dict)  # `forbidden_kinds`
    targets: dict = field(default_factory=dict)  # `targets_of`
    kind_of: Callable[[str], str | None] | None = None  # the domain's ID patterns
    # `RecordState`s of the ticket's records (None: the domain states none), or a function that reads them:
    # read only when a sentence states a status, date or figure, so a step whose reply states none reads none.
    states: tuple | Callable[[], tuple | None] | None = None
    shown: str = ""  # the tool results the model was shown
    # The reply's day (shop's time zone, UTC), or a function giving it as the reply is judged: a time said
    # relative to the reply counts from it (none: such a time is not judged).
    today: tuple | Callable[[], tuple] = ()
    nouns: identityclaims.Nouns = identityclaims.EMPTY  # `identityclaims.nouns_of`

    @classmethod
    def of(
        cls,
        domain,
        *,
        actions=(),
        money=(),
        ledger=(),
        proposals=(),
        rules=(),
        overridden=(),
        states=None,
        shown="",
        today=(),
    ) -> "Records":
        """`rules`: the ticket's rules in force (`RuleData`); `overridden`: ids of those a confirmed card
        quoted; `states`: the records' `RecordState`s (None: the domain states none); `shown`: tool results;
        `today`: the reply's day, or a function giving it."""
        return cls(
            actions=tuple(actions),
            kinds=kinds_of(domain.tools),
            money=tuple(money),
            ledger=tuple(ledger),
            owner_kind=domain.owner_kind,
            proposals=tuple(proposals),
            later=later_kinds_of(domain.tools),
            vocab=vocabulary_of(domain.tools),
            forbidden=forbidden_kinds(rules, domain, overridden),
            targets=targets_of(domain.tools),
            kind_of=domain.kind_of,
            states=states if states is None or callable(states) else tuple(states),
            shown=shown,
            today=today,
            nouns=identityclaims.nouns_of(domain),
        )

    def unsupported(self, text: str, question: str = "", since: int = 0) -> list[Claim]:
        return unsupported(
            text,
            actions=self.actions,
            kinds=self.kinds,
            money=self.money,
            ledger=self.ledger,
            owner_kind=self.owner_kind,
            proposals=self.proposals,
            later=self.later,
            question=question,
            vocab=self.vocab,
            forbidden=self.forbidden,
            since=since,
            targets=self.targets,
            kind_of=self.kind_of,
            states=self.states,
            shown=self.shown,
            today=self.today,
            nouns=self.nouns,
        )


_SAID = {
    DONE: "",
    PENDING: " (pending)",
    FUTURE: " (promised)",
    REFUSED: " (refused)",
    DENIED: " (said not done)",
    OFFER: " (offered)",
    AGREED: " (said confirmed by the customer)",
    STATED: " (stated)",
}


def describe(claims: list[Claim]) -> str:
    return "; ".join(
        f"{c.kind}{_SAID[c.mode]}{' of ' + ', '.join(map(str, c.amounts)) if c.amounts else ''}"
        f'{" — " + c.why if c.why and c.mode != DONE else ""}: "{c.sentence}"'
        for c in claims
    )
