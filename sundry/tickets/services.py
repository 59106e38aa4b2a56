"""Writes to tickets and turns. Every write bumps the ticket's version (tickets.versions)."""

from __future__ import annotations

import contextlib
import json

from django.conf import settings
from django.db import connection, transaction
from django.db.models.signals import post_save, pre_save

from sundry.core.people import is_desk_staff
from sundry.core.tokens import count_tokens, encoding_name_for
from sundry.tickets.models import Tag, Ticket, TicketClass, Turn
from sundry.tickets.versions import (
    ALL,
    bump,
    bump_inserting,
    ticket_class_touch,
    ticket_lock,
    ticket_touch,
)  # noqa: F401  (ticket_lock: part of this module's API)

APPENDED = "_sundry_appended_turns"


class MessageRefused(ValueError):
    """A message that cannot be accepted; the text says why and names the limit."""


def validate_message_text(text: str) -> str:
    cleaned = (text or "").strip()
    if not cleaned:
        raise MessageRefused("The message is empty. Type something before sending.")
    limit = settings.MAX_MESSAGE_CHARS
    if len(cleaned) > limit:
        raise MessageRefused(
            f"The message is {len(cleaned):,} characters; the limit is {limit:,}. Split it into shorter messages."
        )
    return cleaned


def ticket_fields_save(*, ticket: Ticket, fields: list[str]) -> None:
    """Save fields of a ticket edited by hand (the admin): only those, so the version and turn
    counter loaded with the form are never written back over newer ones; then bump and push."""
    editable = [f for f in fields if f not in ("version", "last_turn_number", "agent_claimed_at", "agent_claimed_by")]
    with transaction.atomic():
        ticket_lock(ticket.pk)
        if editable:
            ticket.save(update_fields=editable)
        ticket_touch(ticket.pk)


def ticket_class_save(*, ticket_class: TicketClass) -> TicketClass:
    """Save a class's settings. Every ticket of the class shows its budget, trigger and models
    (the Budget panel), so each is bumped and the open ones pushed after commit."""
    with transaction.atomic():
        created = ticket_class.pk is None
        ticket_class.save()
        if not created:
            ticket_class_touch(ticket_class.pk)
    return ticket_class


def _calls_tokens(payload: dict | None, model: str) -> int:
    """A tool-call turn's weight is mostly its calls, not its (often empty) text."""
    calls = (payload or {}).get("calls")
    return count_tokens(json.dumps(calls, ensure_ascii=False), model) if calls else 0


def turn_append(
    *,
    ticket: Ticket,
    author: str,
    kind: str = Turn.Kind.MESSAGE,
    text: str = "",
    payload: dict | None = None,
    client_key: str = "",
    claimed_at=None,
    stamps=(ALL,),
    wake: bool = False,
    also=(),
    through: int | None = None,
) -> Turn | None:
    """Append a turn with the next number, its token count and the ticket's version bump.

    Numbering comes from the ticket row's own counter, bumped under its row
    lock, so concurrent writers (the agent worker and a customer message)
    never collide. The ticket object is kept current (turn counter, version).
    On PostgreSQL the bump and the insert are one statement (`versions.bump_inserting`).
    `claimed_at`: append only while the ticket's claim is that stamp, else `ClaimLost` and
    nothing written (a run's first write checks its claim with no read of its own).
    `wake`: mark the agent's wake-up at this turn in the same statement (`agent.outbox.mark`).
    `also` and `through` (PostgreSQL only): rows written by the same statement, and the last turn the
    ticket must still have, else nothing is written and None returned (`versions.bump_inserting`).
    """
    model = ticket.ticket_class.working_model
    tokens = count_tokens(text, model) + _calls_tokens(payload, model)
    turn = Turn(
        ticket=ticket,
        number=0,
        author=author,
        kind=kind,
        text=text,
        payload=payload or {},
        tokens=tokens,
        encoding=encoding_name_for(model),
        client_key=client_key,
    )
    # No savepoint of its own: a failure here fails the caller's whole transaction. Rows riding on
    # the turn's statement are written by it alone, atomic by itself: no transaction is opened for it
    # (BEGIN and COMMIT would be two round trips more).
    at_once = bool(also) or through is not None
    with contextlib.nullcontext() if at_once else transaction.atomic(savepoint=False):
        if connection.vendor == "postgresql":
            pre_save.send(sender=Turn, instance=turn, raw=False, using=connection.alias, update_fields=None)
            for row, _ in also:
                pre_save.send(sender=type(row), instance=row, raw=False, using=connection.alias, update_fields=None)
            got = bump_inserting(turn, claimed_at=claimed_at, stamps=stamps, wake=wake, also=also, through=through)
            if got is None:
                return None
            number, version = got
            for row in (turn, *(row for row, _ in also)):
                post_save.send(
                    sender=type(row), instance=row, created=True, raw=False, using=connection.alias, update_fields=None
                )
        elif at_once:
            # One statement carrying other rows is PostgreSQL's (a data-modifying WITH); callers choose it
            # only there (`agent.step._reply_at_once` checks the vendor) and take the transaction otherwise.
            raise ValueError("`also` and `through` need PostgreSQL; write the rows in a transaction instead")
        else:  # two statements where round trips cost nothing (SQLite)
            number, version = bump(ticket.pk, turn=True, claimed_at=claimed_at, stamps=stamps, wake=wake)
            turn.number = number
            turn.save(force_insert=True)
    ticket.last_turn_number, ticket.version = number, version
    # The numbers this loaded ticket appended: a run tells its own turns from others' by them
    # (`agent.loop`), with no read of the turns.
    ticket.__dict__.setdefault(APPENDED, set()).add(number)
    return turn


# --- the desk's lifecycle: assignment, priority, tags ------------------------------------------


def _desk_event(ticket: Ticket, text: str, payload: dict) -> Turn:
    return turn_append(ticket=ticket, author=Turn.Author.SYSTEM, kind=Turn.Kind.EVENT, text=text, payload=payload)


def ticket_assign(*, ticket: Ticket, assignee, user) -> Ticket:
    """Give the ticket to a colleague (or oneself), or to nobody (`assignee=None`)."""
    if assignee is not None and not is_desk_staff(assignee):
        raise MessageRefused("Tickets can only be assigned to desk staff.")
    with transaction.atomic():
        Ticket.objects.filter(pk=ticket.pk).update(assigned_to=assignee)
        ticket.assigned_to = assignee
        whom = "themselves" if assignee == user else (assignee.get_username() if assignee else "nobody")
        _desk_event(
            ticket,
            f"{user.get_username()} assigned the ticket to {whom}.",
            {"assigned_to": assignee.get_username() if assignee else None},
        )
    return ticket


def ticket_set_priority(*, ticket: Ticket, priority: str, user) -> Ticket:
    if priority not in Ticket.Priority.values:
        raise MessageRefused(f"Priority must be one of {', '.join(Ticket.Priority.values)}.")
    with transaction.atomic():
        Ticket.objects.filter(pk=ticket.pk).update(priority=priority)
        ticket.priority = priority
        _desk_event(ticket, f"{user.get_username()} set the priority to {priority}.", {"priority": priority})
    return ticket


MAX_TAGS = 10


def ticket_set_tags(*, ticket: Ticket, text: str, user) -> list[str]:
    """Replace the ticket's tags with those in `text` (comma or space separated, lower-cased slugs)."""
    import re

    from django.utils.text import slugify

    names = list(dict.fromkeys(slugify(part)[:40] for part in re.split(r"[,\s]+", text or "") if slugify(part)))
    if len(names) > MAX_TAGS:
        raise MessageRefused(f"{len(names)} tags; a ticket takes at most {MAX_TAGS}.")
    with transaction.atomic():
        tags = [Tag.objects.get_or_create(name=n)[0] for n in names]
        ticket.tags.set(tags)
        _desk_event(ticket, f"{user.get_username()} set the tags to {', '.join(names) or 'none'}.", {"tags": names})
    return names


def ticket_require_holder(*, ticket: Ticket, user) -> None:
    """A person replies to the customer only on a ticket they hold (taken over and assigned to them),
    so the agent and a colleague never answer at the same time."""
    if ticket.handler != Ticket.Handler.STAFF or ticket.assigned_to_id != user.pk:
        holder = ticket.assigned_to.get_username() if ticket.assigned_to_id and ticket.assigned_to else None
        if ticket.handler == Ticket.Handler.STAFF and holder:
            raise MessageRefused(f"{holder} has this ticket. Ask them to assign it to you before replying.")
        raise MessageRefused("Take over the ticket before replying, so the agent does not answer at the same time.")


def ticket_accepts_customer_messages(ticket: Ticket) -> None:
    if ticket.status == Ticket.Status.CLOSED:
        raise MessageRefused(
            "This conversation is closed. Start a new one from your conversations page; "
            "your text is kept here so you can copy it."
        )
