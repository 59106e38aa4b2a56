"""An agent run: claim the ticket, step until the agent replies, waits on staff or hits
the step limit, let go — and go round again if input came meanwhile.

Runs off the request path (a Celery task, or the in-process executor in the
embedded default). One run per ticket at a time (`claims`); each step is
`step.agent_step`, each tool call `calls.process_call`. Every outcome — reply,
tool result, guard rejection, model failure — is a turn staff can see.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, Expression, Max, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from sundry.agent import claims, failures, handoff
from sundry.agent.claims import CLAIM_TTL, Claim, claimed_elsewhere
from sundry.agent.models import AgentStep
from sundry.agent.provider.gateway import Gateway
from sundry.agent.step import (
    Resolved,
    agent_step,
    resolution_listeners,
    tool_specs,
)
from sundry.agent.toolbox import toolbox_for
from sundry.core.compiledread import CompiledRead
from sundry.tickets.attention import RUN_STOPPED, attention_flag
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.services import APPENDED, turn_append
from sundry.toolservers.models import ToolServer

log = logging.getLogger("sundry.agent")

# What other modules reach through here: the task entry point and the compaction trigger's hook.
__all__ = [
    "agent_run",
    "run_slice",
    "MAX_STEPS_PER_RUN",
    "CLAIM_TTL",
    "Resolved",
    "agent_step",
    "claimed_elsewhere",
    "resolution_listeners",
    "tool_specs",
]

MAX_STEPS_PER_RUN = settings.AGENT_MAX_STEPS_PER_RUN

# Input a run must answer: a customer message, a staff note, or an event (a staff
# decision) whose payload says to resume.
_INPUT = (
    Q(author=Turn.Author.CUSTOMER, kind=Turn.Kind.MESSAGE)
    | Q(kind=Turn.Kind.NOTE)
    | Q(kind=Turn.Kind.EVENT, payload__resume=True)
)
# Input before the last reply is answered; input before a stopped run's error turn is
# staff's until they hand the ticket back (an event that resumes) or new input comes.
_ANSWERED = Q(kind=Turn.Kind.MESSAGE, author__in=(Turn.Author.AGENT, Turn.Author.STAFF)) | failures.STOPS


# Values a layer above reads with the run's one load of the ticket, so what it needs on every
# reply costs no read of its own: name → a function giving an expression on the ticket's row
# (`OuterRef` names its columns). Each lands on the loaded ticket as an attribute of that name,
# as it stood when the run opened the ticket (each pass of the run loads it afresh). The
# customer page registers whether the customer wants e-mail notices (`portal.signals`).
LOAD_ALSO: dict[str, Callable[[], Expression]] = {}


def load_also() -> dict[str, Expression]:
    """`LOAD_ALSO`'s expressions, to annotate a read of tickets with (the run's load; a desk reply's read)."""
    return {name: expression() for name, expression in LOAD_ALSO.items()}


def _inputs_after(ticket_id: int, after: int) -> bool:
    """Input arrived after turn `after`."""
    return Turn.objects.filter(_INPUT, ticket_id=ticket_id, number__gt=after).exists()


def _others_wrote(held: Claim, ticket: Ticket, through: int) -> bool:
    """A turn after `through` that this run did not append, by the turn counter its release
    returned (turn numbers are dense, given under the row lock). Unknown (the claim was not
    let go by that release): True, and the turns are read."""
    last = held.released_at_turn
    if last is None:
        return True
    own = ticket.__dict__.get(APPENDED, ())
    return any(n not in own for n in range(through + 1, last + 1))


def _load_query(ticket_id: int) -> QuerySet:
    """The ticket with its class and customer, and what awaits it (`_start`), in one read."""
    turns = Turn.objects.filter(ticket_id=OuterRef("pk"))
    last = turns.order_by("-number")
    last_reply = Coalesce(
        Subquery(
            Turn.objects.filter(_ANSWERED, ticket_id=OuterRef(OuterRef("pk"))).order_by("-number").values("number")[:1]
        ),
        0,
    )
    return (
        Ticket.objects.select_related("ticket_class", "customer")
        .annotate(
            run_waiting=Exists(turns.filter(_INPUT, number__gt=last_reply)),
            run_last_kind=Subquery(last.values("kind")[:1]),
            run_last_payload=Subquery(last.values("payload")[:1]),
            run_next_step=Coalesce(
                Subquery(
                    AgentStep.objects.filter(ticket_id=OuterRef("pk"))
                    .order_by()
                    .values("ticket_id")
                    .annotate(n=Max("number"))
                    .values("n")
                ),
                0,
            )
            + 1,
            run_has_servers=Exists(
                ToolServer.objects.filter(ticket_class_id=OuterRef("ticket_class_id"), enabled=True)
            ),
            **load_also(),
        )
        .filter(pk=ticket_id)
    )


# `_load_query` compiled once per process and per set of `LOAD_ALSO` names (a name registered
# later compiles it afresh): building it through the ORM cost more than running it.
_ANY_TICKET = -7_000_000_003
_READS: dict[tuple[str, tuple[str, ...]], CompiledRead] = {}


def _read() -> CompiledRead:
    key = (connection.vendor, tuple(LOAD_ALSO))
    read = _READS.get(key)
    if read is None:
        read = _READS[key] = CompiledRead(_load_query, (_ANY_TICKET,))
    return read


def _load(ticket_id: int) -> Ticket | None:
    """The ticket as `_load_query` reads it (None if there is no such ticket)."""
    return _read().get(ticket_id)


def _start(ticket: Ticket) -> tuple[bool, bool, int]:
    """(input after the last reply, the last turn asks the model to go on, the next step's number),
    as `_load` read them."""
    # The last turn is a tool result, rejection or error: the model must read it before replying
    # (not the stop of a run: that run's work is left to staff).
    kind, payload = ticket.run_last_kind, ticket.run_last_payload
    if isinstance(payload, str):  # a JSON column read through a subquery comes back as its text
        payload = json.loads(payload)
    # Nor the rest of a reply held after its shown part was posted (`kept`): the customer has their
    # answer and the rest is staff's; read as unfinished work, any later wake answered again.
    mid_task = (
        kind in (Turn.Kind.TOOL_RESULT, Turn.Kind.REJECTION, Turn.Kind.ERROR)
        and not failures.is_stop(kind, payload)
        and not (kind == Turn.Kind.ERROR and "kept" in (payload or {}))
    )
    return ticket.run_waiting, mid_task, ticket.run_next_step


def _open(
    ticket_id: int, owner: str = "", earlier: tuple[str, ...] = ()
) -> tuple[Ticket, tuple[bool, bool, int], Claim] | None:
    """Claim the ticket for run `owner`, load it and read what awaits it. None if claimed elsewhere (or gone)."""
    # The claim's UPDATE and the load travel together where the database allows (one round trip).
    held, ticket = claims.claim_and_read(ticket_id, _read(), owner, earlier)
    if held is None:
        return None
    if ticket is None:
        ticket = _load(ticket_id)
    start = _start(ticket)
    waiting, mid_task, _ = start
    if held.took_over and _may_act(ticket) and (waiting or mid_task):
        # The run before died holding the ticket with work left: say so where staff look.
        failures.run_recovered(ticket, claims.cause_of(held.previous))
    return ticket, start, held


def _may_act(ticket: Ticket) -> bool:
    return ticket.handler == Ticket.Handler.AGENT and ticket.status != Ticket.Status.CLOSED


def agent_run(ticket_id: int, *, gateway: Gateway | None = None, max_steps: int = MAX_STEPS_PER_RUN) -> int:
    """Step the agent on a ticket until it replies, waits on staff, or hits the step limit. Returns steps taken."""
    return run_slice(ticket_id, gateway=gateway, max_steps=max_steps)[0]


def run_slice(
    ticket_id: int,
    *,
    gateway: Gateway | None = None,
    max_steps: int = MAX_STEPS_PER_RUN,
    deadline: float | None = None,
    owner: str = "",
    earlier: tuple[str, ...] = (),
) -> tuple[int, bool]:
    """`agent_run` that starts no step after `deadline` (a `time.monotonic()` value), so a
    task's time limits bound a step, not a whole run. Returns (steps taken, cut short):
    cut short, the ticket still has work and the caller queues the rest. `owner`: the run's
    identity in its claim (a fresh one by default); `earlier`: the identities of its earlier
    attempts, whose claim it may take back (`claims.claim`).

    Input that arrives while a run holds the ticket finds it claimed and goes
    unanswered by its own wake-up, so once it lets go a run looks for input
    newer than what its last step read, and if there is some, goes round again.
    """
    gateway = gateway or Gateway()
    owner = owner or claims.new_owner()
    steps, unread = 0, False
    while steps < max_steps:
        opened = _open(ticket_id, owner, earlier)
        if opened is None:
            return steps, False  # another run holds the ticket and will look for this input before it stops
        ticket, start, held = opened
        opened_through = ticket.last_turn_number
        settle_through = None
        try:
            taken, read_through, cut = _run_claimed(
                ticket, start, held, gateway, max_steps - steps, unread=unread, deadline=deadline
            )
            # The outbox's mark is settled as the claim is let go, in the same UPDATE: a mark
            # asks for input through some turn, and input the run never read marks a later one,
            # which stays. Cut short, the mark stays until a run finishes the work.
            settle_through = None if cut else read_through
        except SoftTimeLimitExceeded:
            log.error("agent run on ticket %s passed the soft time limit mid-step; letting go of it", ticket_id)
            failures.discard_connection()  # it may have landed mid-statement: let go on a fresh one
            raise
        finally:
            claims.release(held, settle_through=settle_through)
        steps += taken
        if cut:
            return steps, True  # the outbox mark stays until a run finishes the work
        # Looked for after letting go: input posted while this run held the claim queued no run of
        # its own (`services._wake_agent`), and input committed later finds the ticket free and
        # wakes its own. Input the last step never saw may sit before that step's own reply, so the
        # next pass goes by this rather than by "input after the last reply". A step that found the
        # run stopped or its claim taken wrote nothing: what arrived after the run opened is looked for.
        through = read_through if read_through is not None else opened_through
        unread = _others_wrote(held, ticket, through) and _inputs_after(ticket_id, through)
        if read_through is None and not unread:
            return steps, False
        if not unread:
            break  # the mark was settled with the release
        if deadline is not None and time.monotonic() >= deadline:
            return steps, True
    return steps, False


def _run_claimed(
    ticket: Ticket,
    start: tuple[bool, bool, int],
    held: Claim,
    gateway: Gateway,
    budget: int,
    *,
    unread: bool = False,
    deadline: float | None = None,
) -> tuple[int, int, bool]:
    """Steps while the claim is held; returns (steps, last turn the final step could read —
    None if it wrote nothing because the run was stopped or lost its claim meanwhile —, cut
    short by the deadline with the task unfinished)."""
    waiting, mid_task, number = start
    if not _may_act(ticket) or not (unread or waiting or mid_task):
        return 0, ticket.last_turn_number, False
    # The class's tools, resolved once for this claim's steps; the load said whether the class
    # has servers (none: no query reads them).
    toolbox = toolbox_for(ticket.ticket_class, servers=None if ticket.run_has_servers else [])
    # The run's own deadline bounds a run however it is sliced into tasks; `deadline` (the
    # task's) only says when to hand the rest of the work to a new task.
    steps, run_deadline = 0, time.monotonic() + settings.AGENT_RUN_DEADLINE_SECONDS
    while True:
        outcome = agent_step(ticket, gateway=gateway, number=number, held=held, toolbox=toolbox)
        steps, number = steps + 1, number + 1
        if outcome.abandoned:
            return steps, None, False
        # A step that did not stop left a tool result, rejection or error for the model to read next.
        if outcome.stop:
            return steps, outcome.read_through, False
        if steps >= budget or time.monotonic() >= run_deadline:
            # Mid-task with nothing for the customer: staff must know.
            why = (
                f"the run's {budget}-step cap"
                if steps >= budget
                else f"the run's {settings.AGENT_RUN_DEADLINE_SECONDS} s deadline"
            )
            _stop_run(ticket, f"The agent stopped at {why} without replying to the customer.", f"{RUN_STOPPED} {why}")
            return steps, outcome.read_through, False
        # Renewing the lease also reads whether staff took over or closed the ticket meanwhile.
        renewed = claims.renew(held)
        if renewed is None:
            return steps, outcome.read_through, False  # the claim was lost: another run has the ticket
        ticket.handler, ticket.status, ticket.last_turn_number, ticket.version = renewed
        if not _may_act(ticket):
            return steps, outcome.read_through, False
        if deadline is not None and time.monotonic() >= deadline:
            return steps, outcome.read_through, True


def _stop_run(ticket: Ticket, text: str, attention: str) -> None:
    """The stop turn, the customer told a person will reply if it leaves their message unanswered
    (`handoff`: read under the row lock the stop's turn took, before the flag), and the flag."""
    with transaction.atomic():
        stop = turn_append(
            ticket=ticket, author=Turn.Author.SYSTEM, kind=Turn.Kind.ERROR, text=text, payload={"run_stopped": True}
        )
        handoff.tell_stopped(ticket, turn_append, stop.number)
        attention_flag(ticket.pk, attention)
