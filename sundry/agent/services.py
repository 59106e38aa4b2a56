"""What people do to a ticket: customers write, staff reply, note, take over, decide held actions.

Each service stores the turn, runs the cheap classifier passes, and queues
the agent after commit when it is the agent's turn to act.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from sundry.agent import holds, outbox, remote, spending_reads
from sundry.agent.calls import process_call
from sundry.agent.models import HeldAction
from sundry.agent.tasks import agent_run_task
from sundry.context import services as lanes
from sundry.context.assembly import assemble
from sundry.context.selectors import lane_snapshot
from sundry.core.background import enqueue_on_commit
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.services import MessageRefused, turn_append, validate_message_text
from sundry.tickets.versions import ticket_lock, ticket_touch, ticket_update
from sundry.tooling.messages import ToolCall


def _wake_agent(ticket: Ticket) -> None:
    """Queue the agent once the caller's transaction commits, with the wake-up on record in
    it (the outbox), so a broker that is down loses nothing: the sweep queues it later."""
    if ticket.handler == Ticket.Handler.AGENT:
        outbox.mark(ticket.pk, ticket.last_turn_number)
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


def customer_message_post(*, ticket: Ticket, text: str, wake: bool = True, client_key: str = "") -> Turn:
    """Store a customer's message and queue the agent (`wake=False` when the caller runs it itself).

    A post with the `client_key` of one already stored (a resend after an answer that never
    arrived) returns that turn and stores nothing."""
    text = validate_message_text(text)
    client_key = clean_client_key(client_key)
    with transaction.atomic():
        ticket_lock(ticket.pk)  # lock order: the ticket row first; and resends queue here
        earlier = _already_posted(ticket, client_key)
        if earlier is not None:
            return earlier
        turn = turn_append(ticket=ticket, author=Turn.Author.CUSTOMER, text=text, client_key=client_key)
        lanes.ledger_note_customer_ids(ticket=ticket, turn=turn.number, text=text)
        remote.note_typed_ids(ticket=ticket, turn=turn.number, text=text)  # formats its tool servers declare
        lanes.rule_flag_candidates(ticket=ticket, turn=turn.number, text=text, source="customer",
                                   domain=remote.rules_domain(ticket))
        if ticket.status in (Ticket.Status.WAITING, Ticket.Status.RESOLVED):
            ticket_update(ticket.pk, status=Ticket.Status.OPEN)
        if wake:
            _wake_agent(ticket)
    return turn


def _staff_turn(*, ticket: Ticket, text: str, user, client_key: str, kind: str) -> tuple[Turn, bool]:
    """A turn staff wrote, stored once per message key: (the turn, whether it is new). In the caller's transaction."""
    ticket_lock(ticket.pk)
    earlier = _already_posted(ticket, client_key)
    if earlier is not None:
        return earlier, False
    return turn_append(ticket=ticket, author=Turn.Author.STAFF, kind=kind, text=text,
                       payload={"by": user.get_username()}, client_key=client_key), True


def staff_note_post(*, ticket: Ticket, text: str, user, client_key: str = "") -> Turn:
    """A note to the agent (and colleagues); never shown to the customer."""
    text = validate_message_text(text)
    with transaction.atomic():
        turn, new = _staff_turn(ticket=ticket, text=text, user=user, client_key=clean_client_key(client_key),
                                kind=Turn.Kind.NOTE)
        if new:
            lanes.rule_flag_candidates(ticket=ticket, turn=turn.number, text=text, source="staff",
                                       domain=remote.rules_domain(ticket))
            _wake_agent(ticket)
    return turn


def staff_reply_post(*, ticket: Ticket, text: str, user, client_key: str = "") -> Turn:
    """A reply to the customer written by hand."""
    text = validate_message_text(text)
    with transaction.atomic():
        return _staff_turn(ticket=ticket, text=text, user=user, client_key=clean_client_key(client_key),
                           kind=Turn.Kind.MESSAGE)[0]


def ticket_set_handler(*, ticket: Ticket, handler: str, user) -> Ticket:
    if handler not in Ticket.Handler.values:
        raise MessageRefused("Handler must be 'agent' or 'staff'.")
    with transaction.atomic():
        ticket_update(ticket.pk, handler=handler, assigned_to=user if handler == Ticket.Handler.STAFF else None)
        ticket.handler = handler
        verb = "took over the ticket" if handler == Ticket.Handler.STAFF else "handed the ticket back to the agent"
        turn_append(ticket=ticket, author=Turn.Author.SYSTEM, kind=Turn.Kind.EVENT,
                    text=f"{user.get_username()} {verb}.", payload={"handler": handler, "resume": handler == "agent"})
        _wake_agent(ticket)
    return ticket


class HeldActionError(ValueError):
    pass


def _ran_already(held: HeldAction, ticket: Ticket) -> HeldAction | None:
    """An equal hold that already ran; the customer's row is locked first, as every money call does."""
    spending_reads.customer_lock(ticket.customer_id)
    return holds.executed_twin(held, ticket.customer_id)


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
        if not approve:
            turn_append(ticket=ticket, author=Turn.Author.SYSTEM, kind=Turn.Kind.EVENT,
                        text=f"{who} rejected the held {held.tool} call; do not repeat it.",
                        payload={"held": held.pk, "decision": "rejected", "resume": True})
        elif (twin := _ran_already(held, ticket)) is not None:
            # Approving two holds of the same call runs it once.
            reason = (f"The same {held.tool} call was already approved and executed (hold #{twin.pk} on ticket "
                      f"#{twin.ticket_id}); this one was not run.")
            turn = turn_append(ticket=ticket, author=Turn.Author.SYSTEM, kind=Turn.Kind.EVENT,
                               text=f"{who} approved the held {held.tool} call. {reason}",
                               payload={"held": held.pk, "decision": "refused", "same_as": twin.pk})
            held.status, held.result_turn, held.outcome = HeldAction.Status.REFUSED, turn.number, reason
            held.save(update_fields=["status", "result_turn"])
        else:
            ticket = Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk)
            # Guards run again (rules, IDs, refund limit); only the hold itself is lifted.
            assembled = assemble(lane_snapshot(ticket), model=ticket.ticket_class.working_model)
            assembled.recent_result_ids = assembled.recent_result_ids | frozenset(
                str(v) for v in held.arguments.values() if isinstance(v, str)
            )
            turn_append(ticket=ticket, author=Turn.Author.SYSTEM, kind=Turn.Kind.EVENT,
                        text=f"{who} approved the held {held.tool} call.",
                        payload={"held": held.pk, "decision": "approved", "resume": True})
            call = ToolCall(id=held.call_id + "-approved", name=held.tool, arguments=held.arguments)
            # Record the tool call the approval executes, so its result is never orphaned.
            turn_append(ticket=ticket, author=Turn.Author.STAFF, kind=Turn.Kind.TOOL_CALL, text="",
                        payload={"calls": [call.model_dump()], "approved_by": who, "held": held.pk})
            ticket.refresh_from_db()
            call_turn = ticket.last_turn_number
            if remote.is_remote(remote.tool_named(ticket, held.tool)):
                deferred = (call, assembled, call_turn)
            else:
                process_call(ticket, call, assembled, approved_hold=held)
                _held_outcome(held, ticket, call, call_turn)
        if deferred is None:
            ticket_touch(ticket.pk)
            if wake:
                _wake_agent(ticket)
    if deferred is not None:
        call, assembled, call_turn = deferred
        process_call(ticket, call, assembled, approved_hold=held)  # guards again, then the server
        with transaction.atomic():
            ticket_lock(ticket.pk)
            _held_outcome(held, ticket, call, call_turn)
            ticket_touch(ticket.pk)
            if wake:
                _wake_agent(ticket)
    return held


def _held_outcome(held: HeldAction, ticket: Ticket, call: ToolCall, call_turn: int) -> None:
    # The guards run again and may refuse: only a successful result means it ran.
    result = Turn.objects.filter(ticket=ticket, number__gt=call_turn, payload__call_id=call.id).first()
    ran = result is not None and result.kind == Turn.Kind.TOOL_RESULT and result.payload.get("ok") is True
    held.status = HeldAction.Status.EXECUTED if ran else HeldAction.Status.REFUSED
    held.result_turn = result.number if result else None
    held.outcome = "" if ran or result is None else result.text
    held.save(update_fields=["status", "result_turn"])
