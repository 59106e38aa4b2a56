"""What people do to a ticket: customers write, staff reply, note, take over, decide held actions.

Each service stores the turn, runs the cheap classifier passes, and queues
the agent after commit when it is the agent's turn to act.
"""

from __future__ import annotations

import hmac

from django.db import transaction
from django.utils import timezone

from sundry.agent import cardstore, claims, holds, outbox, spending_reads
from sundry.agent.calls import process_call
from sundry.agent.guards import cards
from sundry.agent.models import Confirmation, HeldAction
from sundry.agent.provider import callids
from sundry.agent.tasks import agent_run_task
from sundry.agent.toolbox import Toolbox, servers_if_flagged, toolbox_for
from sundry.attachments import services as attachments
from sundry.attachments.prepare import prepare_all
from sundry.context import services as lanes
from sundry.context.assembly import assemble
from sundry.context.selectors import lane_snapshot
from sundry.core.background import enqueue_on_commit
from sundry.tickets import versions
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.services import MessageRefused, turn_append, validate_message_text
from sundry.tickets.versions import ticket_lock, ticket_touch, ticket_update
from sundry.tooling.messages import ToolCall

# What a post's row lock reads for its wake-up (`_wake_agent`) and its status change.
WAKE_FIELDS = ("handler", "status", *outbox.PENDING_FIELDS, *claims.CLAIM_FIELDS)


def _wake_agent(ticket: Ticket, locked: dict | None = None, marked: bool = False) -> None:
    """Queue the agent once the caller's transaction commits, with the wake-up on record in
    it (the outbox), so a broker that is down loses nothing: the sweep queues it later.

    One wake-up per ticket in flight: a run holding a live claim lets go only after this
    transaction (it needs the row lock this caller holds), and looks for input after letting
    go, so it answers this too; a task queued now would find the ticket claimed and wait a
    claim's life to do nothing. If that run dies instead, the mark stays and the sweep queues
    the ticket once its claim lapses. Likewise a post that finds an earlier post's wake-up still
    pending (queued, not yet claimed: the posts of a burst) adds no task: that run reads it too.

    `locked`: the row's `WAKE_FIELDS` as this transaction's lock read them (they cannot change
    before it ends), so neither is read again; else each is read here. `marked`: the turn that asks
    for the wake-up wrote its mark (`turn_append(wake=True)`)."""
    handler = ticket.handler if locked is None else locked["handler"]
    if handler == Ticket.Handler.AGENT:
        queued = outbox.pending(ticket.pk) if locked is None else outbox.pending_in(locked)
        if not marked:
            outbox.mark(ticket.pk, ticket.last_turn_number)
        if not queued and not (claims.claimed_elsewhere(ticket.pk) if locked is None else claims.claimed_in(locked)):
            enqueue_on_commit(agent_run_task, ticket.pk)


def clean_client_key(raw: str | None) -> str:
    """The page's key for one message: short printable ASCII, or none."""
    key = (raw or "").strip()
    if not key or len(key) > 64 or not key.isascii() or not key.isprintable():
        return ""
    return key


def _already_posted(ticket: Ticket, client_key: str) -> Turn | None:
    """The turn an earlier post with this key stored (call with the ticket row locked)."""
    if not client_key:
        return None
    return Turn.objects.filter(ticket=ticket, client_key=client_key).first()


def _text_and_files(text: str, uploads) -> tuple[str, list]:
    """The message's text and its files made safe (attachments.prepare), or MessageRefused before anything
    is written. Text is checked first, so a message too long is refused before any image is decoded."""
    if (text or "").strip():
        text = validate_message_text(text)
    prepared = prepare_all(list(uploads))
    if prepared and not (text or "").strip():
        text = attachments.default_text(prepared)
    return validate_message_text(text), prepared


def customer_message_post(*, ticket: Ticket, text: str, wake: bool = True, client_key: str = "", uploads=()) -> Turn:
    """Store a customer's message (with the files in `uploads`, if any) and queue the agent (`wake=False`
    when the caller runs it itself).

    A post with the `client_key` of one already stored (a resend after an answer that never
    arrived) returns that turn and stores nothing. A ticket read with `toolbox.with_servers_flag`
    costs no read of its class's tool servers when it has none."""
    text, prepared = _text_and_files(text, uploads)
    client_key = clean_client_key(client_key)
    # The files are in storage before the ticket's row is locked, and gone again unless the message stored them.
    with attachments.stored(ticket, prepared) as files, transaction.atomic():
        # Lock order: the ticket row first; and resends queue here. The lock reads what the wake-up decides on.
        locked = ticket_lock(ticket.pk, *WAKE_FIELDS)
        earlier = _already_posted(ticket, client_key)
        if earlier is not None:
            return earlier
        # What a message does at once reads the declaration files alone: no tool server is contacted.
        box = toolbox_for(ticket.ticket_class, listing=False, servers=servers_if_flagged(ticket))
        # IDs in the domain's formats and in those its tool servers declare; a correction among them
        # ("wrong number, it's …") retires the open cards on the number it replaces.
        found = box.typed_ids(text)
        # The turn's bump stamps what rides on it: the ledger, when the message typed IDs (the
        # event turn naming files, the cards retired and the rules flagged bump on their own).
        stamps = (versions.TURNS, versions.LEDGER) if found else (versions.TURNS,)
        # The wake-up's mark is written with the message (`_wake_agent` decides on the task below).
        marks = wake and locked["handler"] == Ticket.Handler.AGENT
        turn = turn_append(
            ticket=ticket, author=Turn.Author.CUSTOMER, text=text, client_key=client_key, stamps=stamps, wake=marks
        )
        # The agent is told in an event turn after the message: names, types and sizes, never contents.
        attachments.attach(ticket=ticket, turn=turn, files=files, user_id=ticket.customer.user_id)
        corrected = lanes.ledger_note_customer_message(ticket=ticket, turn=turn.number, text=text, found=found)
        cardstore.retire_for(ticket, {c.old for c in corrected}, "The customer corrected this number.")
        lanes.rule_flag_candidates(ticket=ticket, turn=turn.number, text=text, source="customer", domain=box.declared)
        if locked["status"] in (Ticket.Status.WAITING, Ticket.Status.RESOLVED):
            ticket_update(ticket.pk, status=Ticket.Status.OPEN)
            ticket.status = Ticket.Status.OPEN  # the object stays current, as turn_append keeps it
        after = _typed_confirmation(ticket, turn, text, box.servers)
        if wake:
            _wake_agent(ticket, locked, marked=marks)
    if after is not None:
        # A tool server's call runs outside any transaction: confirmed once the message is stored.
        try:
            confirmation_decide(
                card_id=after.pk,
                ticket=ticket,
                confirm=True,
                digest=after.digest,
                via=Confirmation.Via.TYPED,
                wake=wake,
            )
        except ConfirmationError:
            pass  # answered, replaced or expired meanwhile: the card says so, and the message stands
    return turn


def ledger_correct(*, ticket: Ticket, old: str, new: str, user):
    """Staff mark a ledger entry as the wrong number, `new` the one meant: a write on `old` then waits for
    the customer's confirmation naming both, and the open cards acting on `old` are retired."""
    with transaction.atomic():
        ticket_lock(ticket.pk)
        turn = Ticket.objects.values_list("last_turn_number", flat=True).get(pk=ticket.pk)
        entry = lanes.ledger_supersede(ticket=ticket, old=old, new=new, turn=turn, source="staff", user=user)
        cardstore.retire_for(ticket, {entry.value}, f"Staff corrected this number to {entry.superseded_by}.")
    return entry


def _typed_confirmation(ticket: Ticket, turn: Turn, text: str, servers) -> Confirmation | None:
    """Where there are no buttons to press (an API client, an e-mail reply), a message that only says
    "yes" confirms the one open card it answers. With two open cards it confirms nothing: which
    one it means is for the customer to say, not for code to guess. A card for an in-process tool is
    confirmed here, with the message; one for a tool server's tool is returned, to confirm after commit.
    `servers`: the class's enabled tool servers, as the post read them."""
    if not cards.plain_yes(text):
        return None
    open_now = [c for c in cardstore.pending(ticket) if c.turn < turn.number]
    if len(open_now) != 1:
        return None
    card = open_now[0]
    if toolbox_for(ticket.ticket_class, servers=list(servers)).runs_outside(card.tool):
        return card
    confirmation_decide(
        card_id=card.pk, ticket=ticket, confirm=True, digest=card.digest, via=Confirmation.Via.TYPED, wake=False
    )
    return None


def _staff_turn(
    *, ticket: Ticket, text: str, user, client_key: str, kind: str, fields: tuple[str, ...] = ()
) -> tuple[Turn, bool, dict | None]:
    """A turn staff wrote, stored once per message key: (the turn, whether it is new, the row's
    `fields` as the lock read them). In the caller's transaction."""
    locked = ticket_lock(ticket.pk, *fields)
    earlier = _already_posted(ticket, client_key)
    if earlier is not None:
        return earlier, False, locked
    return (
        turn_append(
            ticket=ticket,
            author=Turn.Author.STAFF,
            kind=kind,
            text=text,
            payload={"by": user.get_username()},
            client_key=client_key,
        ),
        True,
        locked,
    )


def staff_note_post(*, ticket: Ticket, text: str, user, client_key: str = "") -> Turn:
    """A note to the agent (and colleagues); never shown to the customer."""
    text = validate_message_text(text)
    with transaction.atomic():
        turn, new, locked = _staff_turn(
            ticket=ticket,
            text=text,
            user=user,
            client_key=clean_client_key(client_key),
            kind=Turn.Kind.NOTE,
            fields=WAKE_FIELDS,
        )
        if new:
            lanes.rule_flag_candidates(
                ticket=ticket,
                turn=turn.number,
                text=text,
                source="staff",
                domain=toolbox_for(ticket.ticket_class, listing=False, servers=servers_if_flagged(ticket)).declared,
            )
            _wake_agent(ticket, locked)
    return turn


def staff_internal_note_post(*, ticket: Ticket, text: str, user, client_key: str = "") -> Turn:
    """A note for colleagues only. It never reaches the model — no request, summary or rule is made
    from it — so nothing the model writes can leak it, in any encoding. It does not wake the agent."""
    text = validate_message_text(text)
    with transaction.atomic():
        return _staff_turn(
            ticket=ticket, text=text, user=user, client_key=clean_client_key(client_key), kind=Turn.Kind.INTERNAL
        )[0]


def staff_reply_post(*, ticket: Ticket, text: str, user, client_key: str = "", uploads=()) -> Turn:
    """A reply to the customer written by hand, with the files in `uploads`, if any."""
    text, prepared = _text_and_files(text, uploads)
    with attachments.stored(ticket, prepared) as files, transaction.atomic():
        turn, new, _ = _staff_turn(
            ticket=ticket, text=text, user=user, client_key=clean_client_key(client_key), kind=Turn.Kind.MESSAGE
        )
        if new:
            attachments.attach(ticket=ticket, turn=turn, files=files, user_id=user.pk)
        return turn


def ticket_set_handler(*, ticket: Ticket, handler: str, user) -> Ticket:
    if handler not in Ticket.Handler.values:
        raise MessageRefused("Handler must be 'agent' or 'staff'.")
    with transaction.atomic():
        ticket_update(ticket.pk, handler=handler, assigned_to=user if handler == Ticket.Handler.STAFF else None)
        ticket.handler = handler
        verb = "took over the ticket" if handler == Ticket.Handler.STAFF else "handed the ticket back to the agent"
        turn_append(
            ticket=ticket,
            author=Turn.Author.SYSTEM,
            kind=Turn.Kind.EVENT,
            text=f"{user.get_username()} {verb}.",
            payload={"handler": handler, "resume": handler == "agent"},
        )
        _wake_agent(ticket)
    return ticket


class HeldActionError(ValueError):
    pass


def _ran_already(held: HeldAction, ticket: Ticket, toolbox: Toolbox) -> str:
    """Why the held call must not run (an equal hold or action already ran); the customer's row is
    locked first, as every money call does."""
    spending_reads.customer_lock(ticket.customer_id)
    return holds.already_done(held, ticket.customer_id, toolbox.tool)


def held_action_decide(*, held_id: int, ticket: Ticket, approve: bool, user, wake: bool = True) -> HeldAction:
    """Approve (execute exactly once) or reject a held call.

    A held call to a tool server runs after the decision commits, outside any transaction and
    lock (`agent.remote`); the decision itself (approved, never pending again) makes it run once."""
    deferred = None
    with transaction.atomic():
        ticket_lock(ticket.pk)  # lock order: the ticket row first, then the held action
        held = HeldAction.objects.select_for_update().get(pk=held_id, ticket=ticket)
        if held.status != HeldAction.Status.PENDING:
            raise HeldActionError(f"This action was already {held.status}.")
        held.status = HeldAction.Status.APPROVED if approve else HeldAction.Status.REJECTED
        held.decided_by, held.decided_at = user, timezone.now()
        held.save(update_fields=["status", "decided_by", "decided_at"])
        who = user.get_username()
        toolbox = toolbox_for(ticket.ticket_class) if approve else None
        if not approve:
            turn_append(
                ticket=ticket,
                author=Turn.Author.SYSTEM,
                kind=Turn.Kind.EVENT,
                text=f"{who} rejected the held {held.tool} call; do not repeat it.",
                payload={"held": held.pk, "decision": "rejected", "resume": True},
            )
        elif ran := _ran_already(held, ticket, toolbox):
            # Approving a call that already ran runs nothing.
            reason = f"{ran}; this one was not run."
            turn = turn_append(
                ticket=ticket,
                author=Turn.Author.SYSTEM,
                kind=Turn.Kind.EVENT,
                text=f"{who} approved the held {held.tool} call. {reason}",
                payload={"held": held.pk, "decision": "refused", "same_as": ran},
            )
            held.status, held.result_turn, held.outcome = HeldAction.Status.REFUSED, turn.number, reason
            held.save(update_fields=["status", "result_turn"])
        else:
            ticket = Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk)
            # Guards run again (rules, IDs, refund limit); only the hold itself is lifted.
            assembled = assemble(lane_snapshot(ticket), model=ticket.ticket_class.working_model)
            assembled.recent_result_ids = assembled.recent_result_ids | frozenset(
                str(v) for v in held.arguments.values() if isinstance(v, str)
            )
            turn_append(
                ticket=ticket,
                author=Turn.Author.SYSTEM,
                kind=Turn.Kind.EVENT,
                text=f"{who} approved the held {held.tool} call.",
                payload={"held": held.pk, "decision": "approved", "resume": True},
            )
            call = ToolCall(id=held.call_id + callids.APPROVED_SUFFIX, name=held.tool, arguments=held.arguments)
            # Record the tool call the approval executes, so its result is never orphaned.
            turn_append(
                ticket=ticket,
                author=Turn.Author.STAFF,
                kind=Turn.Kind.TOOL_CALL,
                text="",
                payload={"calls": [call.model_dump()], "approved_by": who, "held": held.pk},
            )
            ticket.refresh_from_db()
            call_turn = ticket.last_turn_number
            if toolbox.runs_outside(held.tool):
                deferred = (call, assembled, call_turn, toolbox)
            else:
                process_call(ticket, call, assembled, approved_hold=held, toolbox=toolbox)
                _held_outcome(held, ticket, call, call_turn)
        if deferred is None:
            ticket_touch(ticket.pk)
            if wake:
                _wake_agent(ticket)
    if deferred is not None:
        _run_decided_remote(ticket, deferred, wake, lambda t, c, n: _held_outcome(held, t, c, n), approved_hold=held)
    return held


def _run_decided_remote(ticket: Ticket, deferred, wake: bool, record, **decided) -> None:
    """A decided call to a tool server (an approval, a confirmation): run after the decision commits,
    outside any transaction — guards again, then the server — and its outcome recorded."""
    call, assembled, call_turn, toolbox = deferred
    process_call(ticket, call, assembled, toolbox=toolbox, **decided)
    with transaction.atomic():
        ticket_lock(ticket.pk)
        record(ticket, call, call_turn)
        ticket_touch(ticket.pk)
        if wake:
            _wake_agent(ticket)


def _held_outcome(held: HeldAction, ticket: Ticket, call: ToolCall, call_turn: int) -> None:
    # The guards run again and may refuse: only a successful result means it ran.
    result = Turn.objects.filter(ticket=ticket, number__gt=call_turn, payload__call_id=call.id).first()
    ran = result is not None and result.kind == Turn.Kind.TOOL_RESULT and result.payload.get("ok") is True
    held.status = HeldAction.Status.EXECUTED if ran else HeldAction.Status.REFUSED
    held.result_turn = result.number if result else None
    held.outcome = "" if ran or result is None else result.text
    held.save(update_fields=["status", "result_turn"])


class ConfirmationError(ValueError):
    pass


_NOT_OPEN = {
    Confirmation.Status.CONFIRMED: "This card was already confirmed; it ran once and will not run again.",
    Confirmation.Status.DECLINED: "This card was declined; nothing was done. Ask in the conversation if you want it after all.",
    Confirmation.Status.EXPIRED: "This card expired before it was answered; nothing was done. Ask in the conversation to have it proposed again.",
    Confirmation.Status.SUPERSEDED: "This card was replaced by a newer one; nothing was done. Please read the newer card.",
}


def _card_ids(arguments: dict) -> frozenset[str]:
    out = set()
    for value in arguments.values():
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str):
                out.add(v)
    return frozenset(out)


def confirmation_decide(
    *,
    card_id: int,
    ticket: Ticket,
    confirm: bool,
    digest: str | None,
    via: str,
    user=None,
    reason: str = "",
    wake: bool = True,
) -> Confirmation:
    """Confirm (run exactly once) or decline a card.

    `digest` is the exact call the person saw (the page sends the one it rendered); a card whose
    call differs, that was answered already, replaced or expired is refused with the reason and
    nothing runs. Staff confirming for the customer (`via` STAFF) give their reason; it is kept.
    A confirmed call goes through every other guard again: a threshold still holds it for staff."""
    # One line of printable text (a NUL or a control character is no reason, and no column takes it).
    reason = " ".join("".join(ch for ch in (reason or "") if ch.isprintable() or ch.isspace()).split())[:300]
    if via == Confirmation.Via.STAFF and confirm and not reason:
        raise ConfirmationError("Say how the customer confirmed (for example: 'confirmed on the phone at 14:10').")
    deferred, expired = None, False
    with transaction.atomic():
        ticket_lock(ticket.pk)  # lock order: the ticket row first, then the card
        card = Confirmation.objects.select_for_update().filter(pk=card_id, ticket=ticket).first()
        if card is None:
            raise ConfirmationError("There is no such card on this conversation.")
        if card.status != Confirmation.Status.PENDING:
            raise ConfirmationError(_NOT_OPEN.get(card.status, "This card is no longer open."))
        if digest is None or not hmac.compare_digest(str(digest).encode("utf-8", "replace"), card.digest.encode()):
            raise ConfirmationError(
                "This card is not the one on your screen any more; nothing was done. Reload the page and read it again."
            )
        if card.expires_at <= timezone.now():
            card.status, card.note = Confirmation.Status.EXPIRED, "Not answered within the class's window."
            card.save(update_fields=["status", "note"])
            ticket_touch(ticket.pk)
            expired = True
        else:
            deferred = _decide_open(card, ticket, confirm, via, user, reason, wake)
    if expired:
        raise ConfirmationError(_NOT_OPEN[Confirmation.Status.EXPIRED])
    if deferred is not None:
        _run_decided_remote(ticket, deferred, wake, lambda t, c, n: _card_outcome(card, t, c, n), confirmation=card)
    return card


def _decide_open(card: Confirmation, ticket: Ticket, confirm: bool, via: str, user, reason: str, wake: bool):
    """Inside the decision's transaction: record it, and run a local call; a tool server's is returned to run after."""
    card.status = Confirmation.Status.CONFIRMED if confirm else Confirmation.Status.DECLINED
    card.decided_at, card.via, card.staff_reason = timezone.now(), via, reason
    card.decided_by = user if user is not None and getattr(user, "is_authenticated", False) else None
    card.save(update_fields=["status", "decided_at", "via", "staff_reason", "decided_by"])
    title = card.card.get("title") or card.tool
    who = (
        "The customer"
        if via != Confirmation.Via.STAFF
        else f"{user.get_username()}, on the customer's behalf ({reason})"
    )
    if not confirm:
        turn_append(
            ticket=ticket,
            author=Turn.Author.SYSTEM,
            kind=Turn.Kind.EVENT,
            text=f"{who} declined the {card.tool} call ({title}); nothing was done. "
            "Do not propose it again unless they ask for it.",
            payload={"confirmation": card.pk, "decision": "declined", "via": via, "resume": True},
        )
        ticket_touch(ticket.pk)
        if wake:
            _wake_agent(ticket)
        return None
    ticket = Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk)
    turn_append(
        ticket=ticket,
        author=Turn.Author.SYSTEM,
        kind=Turn.Kind.EVENT,
        text=f"{who} confirmed the {card.tool} call ({title}).",
        payload={"confirmation": card.pk, "decision": "confirmed", "via": via, "resume": True},
    )
    # The call's IDs were checked when it was proposed, and the customer read them on the card.
    assembled = assemble(lane_snapshot(ticket), model=ticket.ticket_class.working_model)
    assembled.recent_result_ids = assembled.recent_result_ids | _card_ids(card.arguments)
    call = ToolCall(id=card.call_id + callids.CONFIRMED_SUFFIX, name=card.tool, arguments=card.arguments)
    turn_append(
        ticket=ticket,
        author=Turn.Author.AGENT,
        kind=Turn.Kind.TOOL_CALL,
        text="",
        payload={"calls": [call.model_dump()], "confirmation": card.pk, "via": via},
    )
    ticket.refresh_from_db()
    call_turn = ticket.last_turn_number
    toolbox = toolbox_for(ticket.ticket_class)
    if toolbox.runs_outside(card.tool):
        return call, assembled, call_turn, toolbox
    process_call(ticket, call, assembled, confirmation=card, toolbox=toolbox)
    _card_outcome(card, ticket, call, call_turn)
    ticket_touch(ticket.pk)
    if wake:
        _wake_agent(ticket)
    return None


def _card_outcome(card: Confirmation, ticket: Ticket, call: ToolCall, call_turn: int) -> None:
    result = Turn.objects.filter(ticket=ticket, number__gt=call_turn, payload__call_id=call.id).first()
    if result is not None and result.kind == Turn.Kind.TOOL_RESULT and result.payload.get("ok") is True:
        card.outcome = "executed"
    elif result is not None and result.payload.get("held"):
        card.outcome = "held"
    else:
        card.outcome = "refused"
    card.result_turn = result.number if result else None
    card.save(update_fields=["outcome", "result_turn"])
