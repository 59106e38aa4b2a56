"""Customer-facing text is checked before it is posted, like a tool call is.

Pure: the reply, what the request showed the model, and whether the answer was
cut off, in; a verdict out. The step acts on it:

- "post": send the (possibly cleaned) text; `notes` says what was removed;
- "retry": ask the model once more with `prompt` (empty, truncated, only markup,
  an identifier found nowhere, a reply to the guards instead of the customer, one
  that speaks of the customer in the third person — `addressee`, one that is nothing but a
  refusal of help — `refusals`, one that ends introducing what never follows — `unfinished`);
- "hold": never send it; staff see the text and the reason.

Identifiers: every identifier-like token in the reply (a mix of letters and
digits, like AB-20481, ref_8k2m9q4x or AB-26675-RF01) must appear in what the
request showed — the ledger, state, tool results, the customer's own words.
An invented refund reference is the worst thing a reply can carry.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from sundry.agent.guards import addressee, declaredwords, measures, ownterms, refusals, unfinished
from sundry.agent.provider import callids
from sundry.agent.provider.textcalls import json_spans
from sundry.context.idformats import find_ids
from sundry.tooling.domain import get_domain

POST, RETRY, HOLD = "post", "retry", "hold"
ABOUT_CUSTOMER = "about_customer"  # the reason for a reply that speaks of the customer in the third person
BARE_REFUSAL = "bare_refusal"  # the reason for a reply that only refuses to help (`refusals`)
UNFINISHED = unfinished.UNFINISHED  # the reason for a reply that ends introducing what never follows

# Tool-protocol markup that must never reach a customer.
_MARKUP_BLOCK = re.compile(
    r"<(tool_call|tool_response|tool_result|function_call|function_calls|function|invoke|tools)\b[^>]*>.*?(?:</\1>|$)",
    re.S | re.I,
)
_MARKUP_TAG = re.compile(
    r"</?(?:tool_call|tool_response|tool_result|function_call|function_calls|function|invoke|tools)\b[^>]*>"
    r"|<\|[a-z_]+\|>|\[/?TOOL_CALLS\]|\[/?TOOL_RESULTS\]",
    re.I,
)
# Sundry's own notices and guard text, which are for the model only.
_INTERNAL = re.compile(
    r"^.*(?:ERROR \(guard:|\[system notice\]|\[system event\]|\[staff note to the agent\]).*$", re.M | re.I
)
_FENCE = re.compile(r"```[a-z_]*\s*(.*?)```", re.S)
# Identifier-like: letters and digits mixed, optionally joined by - or _, five characters or more.
_TOKEN = re.compile(r"(?<![\w-])(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z0-9](?:[\w-]*[A-Za-z0-9])?(?![\w-])")
# Amounts, dates, times, ordinals and sizes are facts, not identifiers; so are measures like "20-hour" (`measures`).
_NOT_ID = re.compile(
    r"^(?:\d+(?:st|nd|rd|th|am|pm|h|m|s|min|kg|g|cm|mm|x|gb|tb|mb|k)"
    r"|\d{4}-\d{2}-\d{2}(?:T[\d:]+Z?)?|[A-Z]{3}\d[\d.,]*|\d[\d.,]*[A-Z]{3})$",
    re.I,
)
# A reply written to the guards or the tools rather than to the customer.
_TO_AGENT = re.compile(
    r"\b(?:the guard|guard (?:rejected|rejection|error)|rejected (?:my|the) (?:call|tool)|tool call|the tool (?:returned|failed)"
    r"|i (?:will|'ll|should) (?:now )?(?:call|retry|use) (?:the )?(?:\w+_\w+|tool)|schema error|invalid arguments"
    r"|function call|as an ai\b|system notice)",
    re.I,
)
MIN_TOKEN = 5
# Sundry's own words to the model (its re-asks and guard reasons), which a small model copies into its
# reply without the notice's marker: "The last answer had no message for the customer. Either call a tool …"
_OWN_WORDS = re.compile(
    r"answer had no message for the customer|call a tool \(as a tool call, not as text\)"
    r"|wrote a tool call as text|through the tools interface|fix these fields and call again"
    r"|a reply was held for staff|it was not sent\. write"
    # The re-ask in other words keeps its instructions: "Please call a tool … or write your reply in plain words."
    r"|\bcall a tool\b|write (?:your|the) reply (?:to the customer )?in plain words"
    # The claims re-ask's rules, one of them posted as a reply: "The customer confirmed an action only when
    # its card was confirmed."
    r"|\ban action only when its card (?:was|is) confirmed|as its tool call'?s result show(?:s|ed)"
    r"|its confirmation card or staff hold is open"
    # The call re-ask's own clauses in other words ("Thank you for the tool call, but it was not made. You must
    # never see it."): a tool call said not made, and what the customer must never see.
    r"|\btool[\s_-]?calls?\b[^.!?\n]{0,60}?\b(?:(?:was|were|is|are)(?:\s+not|n't)|ha(?:s|ve)(?:\s+not|n't)\s+been)\s+made\b"
    r"|\b(?:the\s+customer|customers|you)\s+(?:must\s+(?:never|not)|mustn't)\s+see\s+(?:it|this|that|them)\s*(?:[.!;,]|$)"
    # What a re-ask shows as the model's own empty answer, copied back as a reply.
    r"|\(no reply\)"
    # A hold's notice told over in the model's own words ("as the rest of the reply was held for staff (markup)"):
    # Sundry's replies are held, and its reasons are codes in brackets; a customer's refund is "held for approval".
    r"|\b(?:a|the|this|that|my|our)\s+(?:last\s+|previous\s+|first\s+)?(?:reply|replies|answer|response|message)"
    r"\s+(?:was|were|has\s+been|have\s+been|is|got)\s+(?:being\s+)?held\b(?!\s+(?:up|back|at|in|by)\b)"
    r"|\bheld\s+for\s+staff\s*\(\s*(?:[a-z]+_[a-z_]+|markup|notice|echo|repeat|empty|truncated|unfinished)\b",
    re.I,
)
# A reply that is nothing but a stand-in for an answer: an empty answer's placeholder as a re-ask once showed
# it ("(no reply)"), and the model's own variants of it (real-model run 17 posted "no reply" four times).
# Whole replies only: "No reply yet from the courier." is an answer. Bare "none"/"nothing" can answer a
# question ("Anything to pay?" "Nothing."), so only in brackets, which mark a placeholder.
_STAND_IN = re.compile(
    r"^[\s\W]*(?:(?:no|empty)\s+(?:reply|response|answer|message|text|content|output)(?:\s+(?:given|provided))?"
    r"|[(\[{<]\s*(?:none|null|nil|empty|blank|nothing|n/?a|no\s+text)\s*[)\]}>]|null)[\s\W]*$",
    re.I,
)
READS_STAND_INS = True  # the tests' negative control switches it off


def own_words(text: str) -> bool:
    """Sundry's own words to the model copied into a customer-bound text (its re-asks, guard reasons), or a
    stand-in for an answer with nothing in it ("(no reply)", "No response.", "[empty]")."""
    return bool(_OWN_WORDS.search(text or "")) or (READS_STAND_INS and _STAND_IN.match(text or "") is not None)


NAMES_TOOLS = True  # the tests' negative control switches it off


def names_a_tool(text: str, tools) -> bool:
    """A declared tool's own identifier in the text (`get_thing`, `do_other_thing`): a call written out in
    some shape no reader knows ("TOOL (type: function, function: do_thing)", real-model run 16), never
    words for a customer. Only names joined by an underscore, which no sentence writes: "do a thing" is
    English."""
    names = [t for t in tools if "_" in t]
    return (
        bool(names) and re.search(r"(?<![\w-])(?:" + "|".join(map(re.escape, names)) + r")(?![\w-])", text) is not None
    )


# The tests' negative control switches it off.
PROGRAM_WORDS = True
# Letters joined by underscores ("due_date", "reply_channel"): a name in a program — a field, a
# parameter, a key — never a word to a customer. Not inside an e-mail address or a link, and not with
# digits ("gift_card_7815", an identifier a tool returned: the identifier reading judges those).
_PROGRAM_WORD = re.compile(r"(?<![\w@./:#-])[A-Za-z]+(?:_[A-Za-z]+)+(?![\w@-])")


def program_word(text: str, known=()) -> str:
    """The first name written the way programs write them (letters joined by underscores) in `text`, or
    "": Sundry's field and parameter names copied to a customer (real-model run 21 posted "STATE:
    <the fact tool's field names>, …" seven times). `known`: identifiers the request
    showed, which pass. None of the 882 recorded replies of a strong model writes one."""
    if not PROGRAM_WORDS:
        return ""
    return next((m.group() for m in _PROGRAM_WORD.finditer(text or "") if m.group() not in known), "")


# Any element-like tag (a made-up `<staff_note_to_the_agent>`, `<b>`): the page shows text, never markup.
_ANY_TAG = re.compile(r"</?[A-Za-z][\w.:-]*(?:\s+[^<>]*)?/?>")
# A bracketed label opening a line (`[refund] …`, `[tool_name] …`): how small models label a
# tool's name, its description or a made-up record when they write it out. Not `[1]`, not a link.
_LABEL = re.compile(r"^[ \t]*\[[A-Za-z][\w .:-]{0,40}\](?!\()", re.M)
_WORDS_ONLY = re.compile(r"[\W_]+")
_SAYS_SOMETHING = re.compile(r"[^\W_]")  # a letter or a digit: a reply of punctuation alone says nothing
_CALL_TAG = re.compile(r"<(?:tool_call|function_call|function=|invoke)\b|\[TOOL_CALLS\]", re.I)
# The opening of a call object — `{"name": "…", "arguments": {` — left unclosed, so no JSON reader finds it:
# a call cut off at the length limit, or such a cut-off copied back from an earlier call turn.
_CALL_OPENING = re.compile(
    r'\{\s*"name"\s*:\s*"[^"\n]{1,80}"\s*,\s*"(?:arguments|parameters)"\s*:'
    # … or cut off sooner, at the text's end: `{"name": "<tool>", "arguments` (the limit hit mid-key).
    r'|\{\s*"(?:\w{0,12}|name"\s*(?::\s*(?:"[^"\n]{0,80}(?:"\s*(?:,\s*(?:"\w{0,12}"?\s*:?\s*)?)?)?)?)?)$'
)
CALL_AS_TEXT = "a tool call written as text"
_CALL_PROMPT = (
    "You wrote a tool call as text in your reply; it was not made, and the customer must never see it. "
    "Make the call through the tools interface, or write only the reply to the customer."
)


@dataclass
class ReplyVerdict:
    action: str
    text: str = ""  # what to post (POST), or the reply as written (RETRY, HOLD)
    reasons: list[str] = field(
        default_factory=list
    )  # empty, truncated, markup, notice, echo, about_customer, bare_refusal, unfinished, invented_id, to_agent,
    # repeat (`resent`)
    notes: list[str] = field(default_factory=list)  # what was removed, for staff
    invented: list[str] = field(default_factory=list)
    prompt: str = ""  # for RETRY: what the model is told
    quoted: str = ""  # for HOLD on internal_text: which internal-only text it quotes, for staff
    unsupported: str = ""  # for unsupported_claim: the sentences claiming what no record shows (`replyclaims`)

    def as_json(self) -> dict:
        out = {"action": self.action, "reasons": self.reasons, "notes": self.notes, "invented": self.invented}
        if self.quoted:
            out["quoted"] = self.quoted
        if self.unsupported:
            out["unsupported"] = self.unsupported
        if self.action == RETRY and self.prompt:
            out["prompt"] = self.prompt  # Sundry's words the model is shown next: a copy of them is no answer
        return out


def id_tokens(text: str) -> set[str]:
    """Identifier-like tokens in text, known format or not."""
    return set(_id_tokens(_reading(), text or ""))


# A text's tokens, read once per process: a step's request repeats the texts of the steps before it (the
# rules, the lanes, the conversation), and every step reads them all (`known_identifiers`). Held with what
# they were read by — the domain's formats, the measure reading on or off (the default domain and on, save
# in tests) — and swapped whole, so no thread ever reads tokens found by another reading.
_READ: tuple[tuple, dict[str, frozenset[str]]] = ((), {})
_READ_MAX = 2048  # as `Domain.find_ids` keeps its own


def _reading() -> tuple:
    return (find_ids, get_domain(), measures.ON)


def _id_tokens(reading: tuple, text: str) -> frozenset[str]:
    global _READ
    owner, read = _READ
    if len(owner) != len(reading) or any(a is not b for a, b in zip(owner, reading)) or len(read) >= _READ_MAX:
        read = {}
        _READ = (reading, read)
    hit = read.get(text)
    if hit is None:
        out = {v for _, v in find_ids(text)}
        for m in _TOKEN.finditer(text):
            token = m.group(0)
            if len(token) >= MIN_TOKEN and not _NOT_ID.match(token) and not measures.is_measure(token):
                out.add(token)
        hit = read[text] = frozenset(out)
    return hit


def invented_ids(text: str, known) -> list[str]:
    """The identifier-like tokens of a text for the customer that nothing the request showed holds (`known`,
    from `known_identifiers`): the reply check's reading, and the call guards' for a tool's customer text."""
    return sorted(t for t in id_tokens(text) if t not in known)


def call_ids_note(invented) -> str:
    """What the model is told when an invented token is a tool call's ID (`callids`): whose it is."""
    calls = [t for t in invented if callids.generated(t)]
    if not calls:
        return ""
    what = "is the ID of one of your tool calls" if len(calls) == 1 else "are the IDs of your tool calls"
    return f" {', '.join(calls)} {what}: Sundry's own, meaning nothing to the customer."


def _is_call_json(chunk: str, tools: frozenset[str]) -> bool:
    try:
        data = json.loads(chunk)
    except ValueError:
        try:
            data = json.loads(chunk.replace("{{", "{").replace("}}", "}"))
        except ValueError:
            return False
    items = data if isinstance(data, list) else [data]

    def named(d):
        d = d.get("function", d) if isinstance(d, dict) else d
        return isinstance(d, dict) and (
            d.get("name") in tools or ("name" in d and ("arguments" in d or "parameters" in d))
        )

    return bool(items) and all(named(d) for d in items)


def strip_protocol(text: str, tools: frozenset[str] = frozenset()) -> tuple[str, list[str]]:
    """The text without tool-protocol markup, raw call JSON or internal notices; and what was removed."""
    notes = []
    if _CALL_TAG.search(text):
        notes.append(CALL_AS_TEXT)
    out = _MARKUP_BLOCK.sub("", text)
    out2 = _MARKUP_TAG.sub("", out)
    if out2 != text:
        notes.append("tool-protocol markup removed")
    out = _FENCE.sub(lambda m: "" if _is_call_json(m.group(1).strip(), tools) else m.group(0), out2)
    # A call written as JSON anywhere: bare, after preamble, one per line, braces doubled.
    for a, b, _value in reversed(json_spans(out)):
        if _is_call_json(out[a:b], tools):
            out = out[:a] + out[b:]
    out = re.sub(r"\[/?TOOL_CALLS\]", "", out) if out != out2 else out
    if out != out2:
        notes.append("raw tool-call JSON removed")
        if CALL_AS_TEXT not in notes:
            notes.append(CALL_AS_TEXT)
    cleaned = _INTERNAL.sub("", out)
    if cleaned != out:
        notes.append("internal notices removed")
    cleaned = re.sub(r"[ \t]{2,}", " ", cleaned)
    return re.sub(r"\n{3,}", "\n\n", cleaned).strip(), notes


# Words that only frame a quote of the customer — a greeting, "You said:", "Customer:", thanks — and add
# nothing of the reply's own when wrapped around their message.
_FRAMING = frozenset(
    "hi hello hey dear there good morning afternoon evening thanks thank you said wrote asked say says "
    "customer customers message your quote quoted re ok okay sure so well".split()
)
# How far a reply may stray from a customer's message, in word edits per word of it, and still be that
# message said back: a word swapped or two, not an answer with words of its own.
ECHO_EDITS = 0.2
ECHO_MIN_WORDS = 4
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
# The customer's messages a reply must not say back: the latest few the request showed.
RECENT_CUSTOMER = 3


def _words(text: str) -> list[str]:
    return _WORDS_ONLY.sub(" ", (text or "").lower().replace("\u2019", "'")).split()


plain_words = _words  # a text's words, lower-case, without punctuation


def _edits(a: list[str], b: list[str], limit: int) -> int:
    """Word-level edit distance (insert, delete, substitute) between `a` and `b`, or `limit + 1` once past it."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    row = list(range(len(b) + 1))
    for i, wa in enumerate(a, 1):
        prev, row[0] = row[0], i
        best = row[0]
        for j, wb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (wa != wb))
            best = min(best, row[j])
        if best > limit:
            return limit + 1
    return row[-1]


def _said_back(back: list[str], said: list[str], *, near: bool = True) -> bool:
    if len(said) < ECHO_MIN_WORDS:
        return False
    # The framing words the message itself does not use are the reply's wrapping, not its own words.
    kept = [w for w in back if w not in _FRAMING or w in said]
    limit = max(1, int(len(said) * ECHO_EDITS)) if near else 0
    return _edits(said, kept, limit) <= limit


def repeats(reply: str, earlier) -> bool:
    """The reply is one the agent already sent on this ticket, word for word (case and punctuation aside),
    though the customer has written something else since (real-model run 19 posted one reply to seven
    different messages). `earlier`: the agent's replies to other messages. A short one ("You're welcome!")
    is not read. What is done about it is `resent`'s (asked again once; a second copy posted, a third held):
    the same answer to a question asked again in other words is right ("Where is my parcel?", later "Is it
    still in transit?"), and the words alone cannot tell it from a model stuck on one reply. The scorecard
    counts the copies that reached the page."""
    words = _words(reply)
    return len(words) >= ECHO_MIN_WORDS and any(_words(e) == words for e in earlier)


def echoes(reply: str, message) -> bool:
    """The reply is a customer's message said back, exactly or nearly: a word or two swapped, punctuation
    or case changed, a greeting or "You said:" around it — nothing of its own (a small model's commonest
    slip). `message`: one message or several (the customer's recent ones); any of them, or any sentence
    of one long enough to stand alone, said back counts. A reply that quotes part of the customer's
    words (an order number, a product, "you asked about …") and answers has words of its own and passes."""
    messages = [message] if isinstance(message, str) else list(message or ())
    back = _words(reply)
    if not back:
        return False
    for said in messages:
        if not said:
            continue
        if _said_back(back, _words(said)):
            return True
        # One sentence of a longer message said back counts only word for word: a short sentence with a word
        # changed is as often the answer ("It has not shipped yet." → "Your lamp has not shipped yet.").
        sentences = [m.group(0) for m in _SENTENCE.finditer(said)]
        if len(sentences) > 1 and any(_said_back(back, _words(p), near=False) for p in sentences):
            return True
    return False


def declared_texts(specs) -> tuple[str, ...]:
    """The descriptions of the tools declared to the model and of each of their parameters (nested ones
    too): Sundry's words to the model like its re-asks, which a small model copies as its reply.
    `specs`: the tools as offered (dicts of name, description, parameters; or objects with those)."""
    out: list[str] = []

    def walk(schema):
        if isinstance(schema, dict):
            if isinstance(schema.get("description"), str):
                out.append(schema["description"])
            for value in schema.values():
                if isinstance(value, dict | list):
                    walk(value)
        elif isinstance(schema, list):
            for value in schema:
                walk(value)

    for spec in specs or ():
        get = spec.get if isinstance(spec, dict) else lambda k, s=spec: getattr(s, k, None)
        if isinstance(get("description"), str):
            out.append(get("description"))
        walk(get("parameters") or {})
    return tuple(dict.fromkeys(t.strip() for t in out if t and t.strip()))


def declares(text: str, declared=()) -> bool:
    """The text is a tool's or a parameter's description (`declared_texts`), exactly or nearly (`echoes`, the
    measure for a customer's message said back), or carries a sentence of one anywhere, whatever its lead-in
    or numbering (`declaredwords`: "Here are your options: 1. Refund money on an order to …")."""
    return bool(declared) and (echoes(text, declared) or bool(declaredwords.carried(text, declared)))


def copied(text: str, customer_said="", declared=()) -> str:
    """What of a customer-bound text is not its own: "notice" for Sundry's re-asks, guard reasons or notices
    (with or without their marker), for a declared tool's or parameter's description or a sentence of one
    (`declared`, from `declared_texts`) and for Sundry's names for its own workings (`ownterms`: "the rules
    you have pinned", "your ledger"), "echo" for a customer's message said back, exactly or nearly (`echoes`;
    `customer_said`: one message or their recent ones); "" for neither.
    For text that goes out by a tool (`reply_to_customer`), which the reply check never reads."""
    if (
        own_words(text)
        or _INTERNAL.search(text)
        or declares(text, declared)
        or ownterms.used(text)
        or program_word(text)
    ):
        return "notice"
    if customer_said and echoes(text, customer_said):
        return "echo"
    return ""


def check_reply(
    text: str | None,
    *,
    known: set[str] | frozenset[str],
    tools: set[str] | frozenset[str] = frozenset(),
    truncated: bool = False,
    after_rejection: bool = False,
    retried: bool = False,
    customer_said: str = "",
    customer_recent=(),
    declared=(),
    customer_messages=None,
    calls_follow: bool = False,
) -> ReplyVerdict:
    """Judge a reply. `known`: every identifier the request showed (see `id_tokens`);
    `retried`: this is already the second try, so a fault holds instead of retrying;
    `customer_said`: the customer's latest message, which a reply must answer, not repeat;
    `customer_recent`: their other recent messages, which it must not say back either;
    `declared`: the declared tools' and parameters' descriptions (`declared_texts`), Sundry's words too;
    `customer_messages`: every customer message the request showed, for who "the customer" may be
    (`addressee`; None: the latest and recent ones); `calls_follow`: the words were written with tool
    calls, which are what an ending "Let me look that up:" introduces — not an unfinished end."""
    raw = text or ""
    if truncated:
        return _again(
            raw,
            "truncated",
            "Your last reply was cut off at the length limit before it ended. Write a "
            "shorter complete reply to the customer.",
            retried,
        )
    cleaned, notes = strip_protocol(raw, frozenset(tools))
    if _CALL_OPENING.search(cleaned):  # nothing to cut it from: the whole reply is asked again, then held
        return _again(
            raw, "call_as_text", _CALL_PROMPT, retried, notes=[n for n in notes if n != CALL_AS_TEXT] + [CALL_AS_TEXT]
        )
    if not cleaned and CALL_AS_TEXT in notes:
        return _again(raw, "call_as_text", _CALL_PROMPT, retried, notes=notes)
    if not _SAYS_SOMETHING.search(cleaned):  # nothing, or marks alone: a "(" left of a call copied back
        reason = "markup" if raw.strip() and not cleaned else "empty"
        return _again(
            raw,
            reason,
            "Your last answer had no message for the customer. Either call a tool (as a tool "
            "call, not as text) or write the reply to the customer in plain words.",
            retried,
        )
    if CALL_AS_TEXT in notes and not retried:
        return ReplyVerdict(RETRY, raw, ["call_as_text"], notes, prompt=_CALL_PROMPT)
    if json_spans(cleaned):  # a tool result written out, an invented record: data, never words for a customer
        return _again(
            raw,
            "structured",
            "Your reply contained raw data (JSON, or a tool result written out). It "
            "was not sent. Write to the customer in plain words, using only what tools returned; to make a "
            "call, use the tools interface.",
            retried,
            notes=notes,
        )
    if _ANY_TAG.search(cleaned) or _LABEL.search(cleaned):
        return _again(
            raw,
            "markup",
            "Your reply contained markup tags. It was not sent. Write only plain words "
            "to the customer; never write tags, notes to yourself or text meant for staff.",
            retried,
            notes=notes,
        )
    term = ownterms.used(cleaned)
    if own_words(cleaned) or declares(cleaned, declared) or term:
        verdict = _again(
            raw,
            "notice",
            "Your reply repeated Sundry's instructions to you. The customer never sees those. Write to the "
            "customer about their request in plain words.",
            retried,
            notes=notes,
        )
        said = (declaredwords.carried(cleaned, declared) if declared else "") or term
        verdict.quoted = f'Sundry\'s own words ("{said}")' if said else ""
        return verdict
    if echoes(cleaned, [customer_said, *customer_recent]):
        return _again(
            raw,
            "echo",
            "Your reply repeated the customer's message back to them, or nearly. It was not sent. Answer what "
            "they asked in your own words.",
            retried,
            notes=notes,
        )
    invented = invented_ids(cleaned, known)
    if invented:
        return _again(
            raw,
            "invented_id",
            f"Your reply names {', '.join(invented)}, which is in no tool result, ledger entry or customer "
            f"message.{call_ids_note(invented)} Never write a reference that a tool did not return. Rewrite the "
            "reply using only identifiers from the ledger or tool results; if an action did not happen, do not "
            "say it did.",
            retried,
            invented=invented,
            notes=notes,
        )
    if after_rejection and not retried and _TO_AGENT.search(cleaned):
        return ReplyVerdict(
            RETRY,
            raw,
            ["to_agent"],
            notes,
            prompt=(
                "Your last reply spoke about tools or guard errors. The customer never sees those. Either fix the call, "
                "or write to the customer about their request in plain words."
            ),
        )
    # A refusal of help and nothing else leaves the customer's message unanswered, as an empty reply does:
    # asked again, then held, so the hand-off answers them and staff see it (`refusals`).
    # After the readings with a reason of their own (a notice copied, words to the guards): whatever else
    # names a tool by its identifier is a call written out in a shape no reader knows.
    if NAMES_TOOLS and names_a_tool(cleaned, tools):  # "TOOL (type: function, function: <a tool's name>)"
        return _again(
            raw, "call_as_text", _CALL_PROMPT, retried, notes=[n for n in notes if n != CALL_AS_TEXT] + [CALL_AS_TEXT]
        )
    if program_word(cleaned, known | tools):  # a declared tool's name is read above
        return _again(raw, PROGRAM_WORD, PROGRAM_WORD_PROMPT, retried, notes=notes)
    if refusals.bare(cleaned):
        return _again(raw, BARE_REFUSAL, BARE_REFUSAL_PROMPT, retried, notes=notes)
    # A list announced and never given, a heading with nothing under it: what the customer reads must be whole.
    if not calls_follow and unfinished.ending(cleaned):
        return _again(raw, UNFINISHED, UNFINISHED_PROMPT, retried, notes=notes)
    # Last: a reply that fails another check says so first (a quote of internal text, judged after this, is
    # held at once even so: `answer.held_if_internal`).
    about = addressee.about_customer(
        cleaned, [customer_said, *customer_recent] if customer_messages is None else customer_messages
    )
    if about:
        return _again(raw, ABOUT_CUSTOMER, about_customer_prompt(about), retried, notes=notes)
    return ReplyVerdict(POST, cleaned, [], notes)


BARE_REFUSAL_NEXT = (
    "Answer their request: look up what they asked about with the tools, or ask them for what you need. If it "
    "is something you cannot do, say why and what can be done instead."
)
PROGRAM_WORD = "program_word"
PROGRAM_WORD_PROMPT = (
    "Your reply used a name written with underscores, from the software's workings. The customer never "
    "sees those. Write to the customer about their request in plain words."
)
BARE_REFUSAL_PROMPT = (
    "Your reply only refused to help, with no reason and nothing the customer can do next. It was not sent. "
    + BARE_REFUSAL_NEXT
)


UNFINISHED_PROMPT = (
    "Your reply ended by introducing something it never gave: a list, steps or a heading with nothing after "
    "it. It was not sent. Write a complete reply, shorter if need be, that gives in full whatever it announces."
)


def about_customer_prompt(phrases: list[str]) -> str:
    """The re-ask for a reply that speaks of the customer in the third person (`addressee`)."""
    named = ", ".join(f'"{p}"' for p in dict.fromkeys(phrases))
    return (
        f"Your reply spoke of the customer in the third person ({named}), as a note for staff or for yourself. "
        'It was not sent. The customer reads every reply: write to them directly, as "you", about their request.'
    )


def _again(raw: str, reason: str, prompt: str, retried: bool, *, invented=None, notes=None) -> ReplyVerdict:
    return ReplyVerdict(HOLD if retried else RETRY, raw, [reason], notes or [], invented or [], prompt)


def known_identifiers(texts) -> set[str]:
    """Every identifier-like token in the texts the request showed the model."""
    reading = _reading()
    out: set[str] = set()
    for t in texts:
        out |= _id_tokens(reading, t or "")
    return out
