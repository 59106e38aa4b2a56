"""Getting an answer the step can act on: the model call, calls written as text, the reply check.

The step calls `obtain` once. It calls the model once (the gateway's call
retries inside it, honouring Retry-After, within its deadline), reads tool calls written as text where the class opts in,
and checks a plain reply (`replycheck`); a reply that fails the check is asked
for once more, with the reason, in the same step. The words written with calls
are checked the same way, without the second ask. What comes back says what
to do: run the calls, post the reply, hold it for staff, or report the error.
Given a `ReplyStream`, each call streams its reply to the ticket's watchers as
provisional text, cut before anything the check would not let through.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from decimal import Decimal

from sundry.agent import recordstates
from sundry.agent.guards import provisional, replycheck, replyclaims, resent, unfinished
from sundry.agent.provider import callids, textcalls
from sundry.agent.provider.gateway import Gateway, GatewayCall, ModelCallError
from sundry.agent.streaming import ReplyStream
from sundry.context import internaltext, render
from sundry.context.lanes import TurnData
from sundry.context.render import SYSTEM_NOTICE_PREFIX
from sundry.tooling.messages import Message, ModelRequest, ModelResponse, Usage


@dataclass
class Answer:
    call: GatewayCall | None  # the last call, with cost, latency and usage summed over every call made
    error: ModelCallError | None = None
    verdict: replycheck.ReplyVerdict | None = None  # for a plain reply
    text_calls: str = ""  # the shape of calls read from text (hermes, fenced, bare), if any
    checks: list[dict] = field(default_factory=list)  # each reply check, for the step's record
    # Input tokens the provider reported for the request as assembled (the first call; a re-ask's
    # request is longer): what the step's token estimate is calibrated against.
    request_input_tokens: int = 0
    # A reply the check would not post whole, of which a checked first part had already streamed to
    # the watchers: `verdict` posts exactly that part, `rest` is what is held for staff and `held`
    # the whole reply's verdict (why).
    held: replycheck.ReplyVerdict | None = None
    rest: str = ""

    @property
    def response(self) -> ModelResponse | None:
        return self.call.response if self.call else None


# A re-ask with less of the step's time left than this is not made: the reply is held instead.
MIN_REASK_SECONDS = 1.0
# Once checked text has streamed to a screen, the customer keeps it: a reply the check would not post
# whole is posted as exactly what was shown, and only the rest is held (asking again would take back
# what they read). Off, the whole reply is held or asked again and the shown text is withdrawn.
KEEP_SHOWN = True
# The words a model writes with its tool calls ("Let me look that order up.") are a reply to the customer:
# checked whole and posted (or held), as a plain reply is. Off, they only go with the calls to the model's
# next request, and whatever of them streamed is taken off the watchers' screens.
SAY_WITH_CALLS = True


def _plain(text: str) -> str:
    """Text as a page shows it: runs of whitespace are one space (the check collapses them too)."""
    return " ".join((text or "").split())


def extends(stored: str, shown: str) -> bool:
    """Whether `stored` reads as `shown` and perhaps more: nothing shown is taken back or changed."""
    return _plain(stored).startswith(_plain(shown))


def _call(
    gateway: Gateway, request: ModelRequest, model: str, stream: ReplyStream | None = None, timeout: float | None = None
) -> tuple[GatewayCall | None, ModelCallError | None, int]:
    """(call, error, latency of a failed call, every attempt in it). `timeout`: the call's whole
    deadline, when the step has less left than the gateway's own limits allow."""
    try:
        if stream is not None:
            return gateway.call(request, model=model, stream=stream, timeout=timeout), None, 0
        return gateway.call(request, model=model, timeout=timeout), None, 0
    except ModelCallError as exc:
        return None, exc, exc.latency_ms


def _left(deadline: float | None) -> float | None:
    """Seconds of the step's model time left; None: no deadline (the gateway's limits alone)."""
    return None if deadline is None else deadline - time.monotonic()


def _summed(calls: list[GatewayCall], extra_ms: int) -> GatewayCall:
    last = calls[-1]
    usage = Usage(
        input_tokens=sum(c.response.usage.input_tokens for c in calls),
        output_tokens=sum(c.response.usage.output_tokens for c in calls),
        cached_input_tokens=sum(c.response.usage.cached_input_tokens for c in calls),
        cache_write_tokens=sum(c.response.usage.cache_write_tokens for c in calls),
    )
    return GatewayCall(
        response=last.response.model_copy(update={"usage": usage}),
        resolved=last.resolved,
        cost_usd=sum((c.cost_usd for c in calls), Decimal(0)),
        priced=all(c.priced for c in calls),
        latency_ms=sum(c.latency_ms for c in calls) + extra_ms,
    )


LATER_RESULT = SYSTEM_NOTICE_PREFIX + "later result of "


# A tool call's ID is never one of the customer's identifiers, wherever the request showed it (a later
# result's notice names its call, a summary may): written to the customer, it reads as invented. Off, an ID
# shown in such a text counts as known like any other.
CALL_IDS_UNKNOWN = True


def known_identifiers(request: ModelRequest) -> set[str]:
    """Identifier-like tokens in what the request showed the model from a source of truth: the lanes,
    the customer's and staff's words, tool results. The model's own words are not one — neither its
    replies nor its calls' arguments — and nor is a refusal or an error, which quotes the refused
    argument back: an ID a guard turned away stays unknown to the reply check. Nor is a tool call's
    ID (`callids`): one of the request's calls, or of a form Sundry or a provider gives calls."""
    texts = []
    for m in request.messages:
        if m.role == "assistant":
            continue
        if m.role == "tool" and (m.content or "").startswith(render.ERROR_PREFIX):
            continue
        if (m.content or "").startswith(SYSTEM_NOTICE_PREFIX) and not m.content.startswith(LATER_RESULT):
            continue  # a refusal, an error, a held reply's quote: Sundry's words about the model's, not facts
        texts.append(m.content)
    known = replycheck.known_identifiers(texts)
    if not CALL_IDS_UNKNOWN:
        return known
    calls = callids.in_request(request.messages)
    return {t for t in known if t not in calls and not callids.generated(t)}


# Sundry's notices in the request count as its own words, like the tools' descriptions: a reply that carries
# one of their sentences is no answer (real-model run 21 posted a re-ask's "Your last reply was cut off at the
# length limit before it ended." as its reply). Off, only the descriptions and the phrases `replycheck` lists.
NOTICES_ARE_OWN_WORDS = True


def notice_texts(request: ModelRequest) -> tuple[str, ...]:
    """What Sundry itself told the model in the request, by where it stands, not by how it reads: its
    system notices (a reply held, a run stopped). Not a guard's refusal or error, which states facts a
    true reply may repeat ("order SU-1 is already refunded"), nor a later result's notice, whose result is
    a fact to use."""
    if not NOTICES_ARE_OWN_WORDS:
        return ()
    return tuple(
        m.content[len(SYSTEM_NOTICE_PREFIX) :]
        for m in request.messages
        if m.role == "system"
        and (m.content or "").startswith(SYSTEM_NOTICE_PREFIX)
        and not m.content.startswith(LATER_RESULT)
    )


def _latest_customer_text(turns: list[TurnData]) -> str:
    return next((t.text for t in reversed(turns) if t.author == "customer" and t.kind == "message"), "")


def recent_customer_texts(turns: list[TurnData], n: int = replycheck.RECENT_CUSTOMER) -> list[str]:
    """The customer's last `n` messages, latest first: what a reply must not say back."""
    return [t.text for t in reversed(turns) if t.author == "customer" and t.kind == "message"][:n]


def customer_texts(turns: list[TurnData]) -> list[str]:
    """The customer's messages since the summary: whom they themselves call "the customer" or "the user" (`addressee`)."""
    return [t.text for t in turns if t.author == "customer" and t.kind == "message"]


def after_rejection(turns: list[TurnData]) -> bool:
    """A guard rejection or error since the last customer message or staff note."""
    for t in reversed(turns):
        if (t.author == "customer" and t.kind == "message") or t.kind == "note":
            return False
        if t.kind in ("rejection", "error"):
            return True
    return False


def held_if_internal(
    verdict: replycheck.ReplyVerdict, internal: internaltext.InternalText | None
) -> replycheck.ReplyVerdict:
    """A reply that would be posted but quotes internal-only text is held for staff instead (never re-asked:
    the model has shown it will repeat what it should not). So is one the check would ask again only for
    speaking of the customer in the third person: staff's notes do, and a quote of one is held at once; and
    one it would ask again only for ending unfinished (`_only_unfinished`)."""
    if not internal or not (
        verdict.action == replycheck.POST or verdict.reasons == [replycheck.ABOUT_CUSTOMER] or _only_unfinished(verdict)
    ):
        return verdict
    found = internaltext.quotes(verdict.text, internal)
    if not found:
        return verdict
    return replycheck.ReplyVerdict(
        replycheck.HOLD, verdict.text, ["internal_text"], verdict.notes, quoted=internaltext.describe(found)
    )


def _only_unfinished(verdict: replycheck.ReplyVerdict) -> bool:
    """The check would post it but for its unfinished end (`unfinished`): what it does say is judged as a
    posted reply's would be, and a false claim or an internal quote in it is the reason given, not the form."""
    return verdict.action != replycheck.POST and verdict.reasons == [replycheck.UNFINISHED]


# What the model is told when a reply said an identifier is of a kind it is not ("<order> is the customer ID").
IDENTITY_RULE = (
    " Say what an identifier is (an order, a customer ID, a tracking number …) only as the ID ledger or a tool "
    "result shows its kind."
)


def checked_claims(
    verdict: replycheck.ReplyVerdict, facts: replyclaims.Records | None, retried: bool, question: str = ""
) -> replycheck.ReplyVerdict:
    """A reply that would be posted but says of an action what the records do not show — done when no
    tool did it, pending or promised with no card or hold open for it, declined when nothing was, not
    done when it ran — is asked for again, then held: the customer must never read that a refund or
    cancellation happened, or will, when it did not and will not. `question`: the customer's latest
    message, which a bare "Yes, that's done" answers."""
    if not (verdict.action == replycheck.POST or _only_unfinished(verdict)) or facts is None:
        return verdict
    false = facts.unsupported(verdict.text, question)
    if not false:
        return verdict
    said = replyclaims.describe(false)
    stated = (
        " State an order's status, its dates and its amounts only as the records or tool results show them."
        if any(c.mode == replyclaims.STATED and c.kind != replyclaims.IDENTITY for c in false)
        else ""
    ) + (IDENTITY_RULE if any(c.kind == replyclaims.IDENTITY for c in false) else "")
    if all(c.mode == replyclaims.STATED for c in false):
        prompt = (
            f"Your reply states a fact of the customer's records — a status, date or amount, or what an "
            f"identifier is — that its records and the tool results do not show ({said}). It was not sent. Look "
            "the record up, or say only what you know."
        ) + stated
    elif all(c.mode in (replyclaims.DONE, replyclaims.STATED) for c in false):
        prompt = (
            f"Your reply says something was done that no tool did on this ticket ({said}). It was not sent. "
            "Say an action happened, and for how much, only as its tool call's result showed it; if it has not "
            "been done, say what happens next instead, or make the call."
        ) + stated
    else:
        prompt = (
            f"Your reply says something about an action that this ticket's records do not show ({said}). It "
            "was not sent. Say an action is done only as its tool call's result showed it; say one is under way "
            "or will happen only once you have made the call and its confirmation card or staff hold is open "
            "(make the call first); say one was declined only when it was; never say something was not done "
            "when it was; offer only what a tool can do and no rule forbids, that was not declined or done "
            "already, and for the open card's figure; say the customer confirmed an action only when its card "
            "was confirmed. Amounts only as the records or the card show them."
        ) + stated
    return replycheck.ReplyVerdict(
        replycheck.HOLD if retried else replycheck.RETRY,
        verdict.text,
        ["unsupported_claim"],
        verdict.notes,
        unsupported=said,
        prompt=prompt,
    )


def sentence_passes(
    upto: str,
    facts: replyclaims.Records | None,
    internal: internaltext.InternalText | None,
    question: str = "",
    posts_as_is=None,
) -> bool:
    """Whether the reply up to a sentence's end may be shown before the whole reply is checked: it
    claims nothing the records do not show and quotes no internal-only text (`provisional`). Judged
    as one text, so a sentence is read with what came before it ("It's done." after "your refund");
    only its last sentence's claims are judged again (the stream stopped at any earlier one that failed).
    `posts_as_is(upto)`: the reply check would post that text unchanged, were it the whole reply (no
    copy of Sundry's own words, no echo …), so whatever is shown can be kept as the stored reply."""
    if posts_as_is is not None and not posts_as_is(upto):
        return False
    if internal and internaltext.quotes(upto, internal):
        return False
    return facts is None or not facts.unsupported(upto, question, _since(upto))


def _since(upto: str) -> int:
    """The first sentence of `upto` the stream has not shown yet: its last, and any before it that left the
    text unfinished (`provisional` shows "…these steps:" only with the first step, and judges them as one)."""
    parts = provisional.sentences(upto, final=True)
    since = max(0, len(parts) - 1)
    while since > 0 and unfinished.ending("".join(parts[:since])):
        since -= 1
    return since


def _keep_shown(answer: Answer, verdict: replycheck.ReplyVerdict, text: str, stream: ReplyStream | None, judge) -> bool:
    """A reply the check would not post as the watchers saw it, of which checked text is on their screens:
    that part, if it passes the whole check on its own, becomes the answer's reply and the rest is held
    for staff (True); else nothing changes (False)."""
    shown = stream.shown_text if stream is not None else ""
    if not KEEP_SHOWN or not shown.strip() or (verdict.action == replycheck.POST and extends(verdict.text, shown)):
        return False
    # Part of it is on the customer's screen already, each sentence checked as it went out: that
    # part, if it passes the whole check on its own, is the reply; the rest is held for staff. A part
    # that ends introducing what never came ("…these steps: 1. **Check:**") is kept only up to its last
    # complete sentence before that, if any: the page must not show a list announced and not given.
    part = unfinished.finished_part(shown) if unfinished.ending(shown) else shown
    if not part.strip():
        return False
    kept = judge(part, truncated=False, retried=True)
    if kept.action != replycheck.POST or _plain(kept.text) != _plain(part):
        return False
    if verdict.action == replycheck.POST:  # cleaned into something else than was shown
        verdict.reasons = [*verdict.reasons, "not_as_shown"]
    verdict.action = replycheck.HOLD
    answer.checks[-1] = {**answer.checks[-1], **verdict.as_json(), "kept_shown": True}
    kept.text = part.strip()  # stored as the screens show it (up to its unfinished end)
    answer.verdict, answer.held = kept, verdict
    answer.rest = (text[len(part) :] if text.startswith(part) else text).strip()
    return True


def obtain(
    gateway: Gateway,
    request: ModelRequest,
    *,
    model: str,
    turns: list[TurnData],
    text_tool_calls: bool = False,
    stream: ReplyStream | None = None,
    internal: internaltext.InternalText | None = None,
    facts: replyclaims.Records | None = None,
    deadline: float | None = None,
) -> Answer:
    """`deadline` (a `time.monotonic()` value): when the step's model time ends. The answer and its
    re-ask share it: a re-ask gets only what the first answer left, and none if under a second."""
    tools = {t.name for t in request.tools}
    declared = (*replycheck.declared_texts(request.tools), *notice_texts(request))
    known = known_identifiers(request)
    question = _latest_customer_text(turns)
    recent = recent_customer_texts(turns)
    everything = customer_texts(turns)
    rejected = after_rejection(turns)
    sent = resent.Sent.of(turns)

    def judge(text: str, *, truncated: bool, retried: bool, calls_follow: bool = False) -> replycheck.ReplyVerdict:
        verdict = replycheck.check_reply(
            text,
            calls_follow=calls_follow,
            known=known,
            tools=tools,
            truncated=truncated,
            after_rejection=rejected,
            retried=retried,
            customer_said=question,
            customer_recent=recent,
            declared=declared,
            customer_messages=everything,
        )
        verdict = held_if_internal(verdict, internal)
        return checked_claims(verdict, facts, retried, question)

    def posts_as_is(upto: str) -> bool:
        # Judged as a first answer (the stricter): posted unchanged, no claims (those are judged by
        # sentence in `sentence_passes`).
        verdict = replycheck.check_reply(
            upto,
            known=known,
            tools=tools,
            after_rejection=rejected,
            customer_said=question,
            customer_recent=recent,
            declared=declared,
            customer_messages=everything,
        )
        return verdict.action == replycheck.POST and _plain(verdict.text) == _plain(upto)

    ahead = None
    if stream is not None:
        local = getattr(gateway, "is_local", None)  # a wrapper that cannot say is taken for a network one
        if facts is not None and callable(facts.states) and not (local is not None and local(model)):
            # The sentences are judged inside the network call's event loop, where the database is not
            # read: the records are read beside it while the model writes (joined below, before this
            # thread reads again).
            ahead = recordstates.Ahead(facts.states)
            facts = dataclasses.replace(facts, states=ahead)
        stream.known = frozenset(known)
        stream.sentence_ok = lambda upto: sentence_passes(upto, facts, internal, question, posts_as_is)
        # A reply sent before may be asked again: nothing of it shows until it says something of its own.
        stream.waits = (lambda upto: sent.so_far(upto)) if resent.ASK_AGAIN else None
    try:
        calls: list[GatewayCall] = []
        failed_ms = 0
        answer = Answer(call=None)
        for retried in (False, True):
            left = _left(deadline)
            if retried and left is not None and left < MIN_REASK_SECONDS and resent.only_repeat(answer.verdict):
                resent.unasked(answer.verdict, sent)  # no time to ask again: a second copy posts, a third is held
                answer.checks[-1] = {**answer.checks[-1], "not_asked_again": "no_time"}
                break
            if retried and left is not None and left < MIN_REASK_SECONDS:
                # No time left in the step to ask again: held, never sent, and said why.
                answer.verdict.action = replycheck.HOLD
                answer.verdict.reasons = [*answer.verdict.reasons, "no_time_to_ask_again"]
                answer.checks[-1] = answer.verdict.as_json()
                break
            # Never longer than the gateway's own deadline for a call; shorter when the step has less left.
            timeout = None if left is None or left >= gateway.limits.call_timeout else max(left, 0.0)
            call, error, ms = _call(gateway, request, model, stream, timeout=timeout)
            failed_ms += ms
            if call is None:
                if calls:  # the first answer stands; the re-ask failed
                    break
                error.latency_ms = failed_ms
                return Answer(call=None, error=error)
            response = call.response
            if text_tool_calls:
                response, shape = textcalls.apply(response, tools)
                answer.text_calls = shape or answer.text_calls
                call = GatewayCall(
                    response=response,
                    resolved=call.resolved,
                    cost_usd=call.cost_usd,
                    priced=call.priced,
                    latency_ms=call.latency_ms,
                )
            calls.append(call)
            if len(calls) == 1:
                answer.request_input_tokens = call.response.usage.input_tokens
            if response.tool_calls:
                answer.verdict = None
                prose = (response.text or "").strip()
                if prose and SAY_WITH_CALLS:
                    # The words written with the calls (beside native calls, or around calls written as text,
                    # the calls taken out): a reply in its own right, checked whole against the records as they
                    # stand before the calls run, and never asked for again (that would ask for the calls
                    # again): posted, or held for staff. The calls go to the guards either way.
                    verdict = judge(prose, truncated=False, retried=True, calls_follow=True)
                    answer.verdict = verdict
                    answer.checks.append({**verdict.as_json(), "with_calls": True})
                    _keep_shown(answer, verdict, prose, stream, judge)
                break
            verdict = judge(response.text, truncated=response.truncated, retried=retried)
            if not response.offline:  # the offline agent's reply is Sundry's code's, the same when asked again
                verdict = resent.judged(verdict, sent, retried)
            answer.verdict = verdict
            answer.checks.append(verdict.as_json())
            if _keep_shown(answer, verdict, response.text or "", stream, judge):
                break
            if verdict.action != replycheck.RETRY:
                break
            # Ask once more in the same step, showing the model its reply and why it was not sent. An empty
            # answer is shown as nothing: a stand-in of Sundry's ("(no reply)") is text the model copies back.
            said = [Message(role="assistant", content=response.text)] if (response.text or "").strip() else []
            if NOTICES_ARE_OWN_WORDS:
                declared = (*declared, verdict.prompt)  # what the re-ask tells the model is Sundry's words too
            notice = Message(role="user", content=SYSTEM_NOTICE_PREFIX + verdict.prompt)
            if resent.only_repeat(verdict):
                # Nothing to mend in a reply sent before: the model is told so in Sundry's voice, and not shown
                # the reply again (shown it, a small model writes it once more).
                said, notice = [], Message(role="system", content=SYSTEM_NOTICE_PREFIX + verdict.prompt)
            request = request.model_copy(update={"messages": [*request.messages, *said, notice]})
        if resent.only_repeat(answer.verdict):
            resent.unasked(answer.verdict, sent)  # the re-ask failed: a second copy posts, a third is held
        elif answer.verdict is not None and answer.verdict.action == replycheck.RETRY:
            # The re-ask failed: what was asked for again is not sent either.
            answer.verdict.action = replycheck.HOLD
        answer.call = _summed(calls, failed_ms)
        return answer
    finally:
        if ahead is not None:
            ahead.join()  # the records read is done with this thread's connection
