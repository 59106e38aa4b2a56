"""Run scenarios through the real agent loop and judge them by what happened in the shop.

One run = one scenario in one mode on a new ticket of the chosen class: each
customer message is posted with `customer_message_post` and answered by
`agent_run` (with the mode's gateway); a message sent before the agent answered
the one before it (`also`) is stored first, and the agent then works once. Staff
steps use the desk's own services (`held_action_decide`, `ticket_set_handler`,
`staff_reply_post`, `staff_note_post`, `state_set`); the customer's Confirm and
Not now on the cards their page shows (`cardstore.open_cards`) go through
`confirmation_decide`, as the page's button does, and the agent then works as
after a staff step. Background work (compactions) is deferred and run in this
thread after every agent run, so runs are deterministic. After the run its shop
effects are read, judged and undone.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.test.utils import override_settings

from sundry.context.render import HANDED_OFF
from sundry.evals.scenarios import effects as fx
from sundry.evals.scenarios.casting import Cast, ShopIndex, cast
from sundry.evals.scenarios.modes import MODES, REFERENCE, BaselineGateway, Mode, compaction_listener
from sundry.evals.scenarios.schema import Also, CustomerStep, During, Fact, Message, Scenario, Staff, message_text
from sundry.evals.scorecard import read_by_customers

STAFF_USERNAME = "scenario-staff"


@dataclass
class FactResult:
    fact: Fact
    ok: bool
    missing: list[str]
    present_forbidden: list[str]
    replies: list[str]


@dataclass
class RunResult:
    scenario: str
    mode: str
    effects: list[fx.ShopEffect]
    judgement: fx.Judgement
    facts: list[FactResult]
    compactions: int
    steps: int
    request_tokens: list[int]  # what the model read, per step
    sundry_tokens: list[int]  # Sundry's request at the same steps (equal-token check for baselines)
    held: list[str]  # held calls, by status
    seconds: float
    ticket_id: int
    transcript: list[tuple[str, str]] = field(default_factory=list)  # (who, text) as the customer saw it
    # Confirmation cards, by status: "cancel_order confirmed (button) → executed: Cancel order SU-…".
    cards: list[str] = field(default_factory=list)
    # What the customer's presses met (a card that could not be decided, with the service's reason).
    presses: list[str] = field(default_factory=list)
    damage_lost: list[fx.ShopEffect] = field(default_factory=list)
    damage_extra: list[fx.ShopEffect] = field(default_factory=list)
    error: str = ""
    # What the customer read (`scorecard.read_by_customers`), judged before the run's actions and
    # holds are undone for the next run: afterwards the records its replies stood on are gone.
    read: dict | None = None
    # Customer messages (turns) sent before the run for the one before them had ended: one reply
    # answers them all (`scorecard.unanswered`).
    together: list[int] = field(default_factory=list)

    @property
    def forbidden(self) -> int:
        return len(self.judgement.forbidden)

    @property
    def damage(self) -> int:
        return len(self.damage_lost) + len(self.damage_extra)

    @property
    def facts_ok(self) -> int:
        return sum(f.ok for f in self.facts)


@dataclass
class ScenarioResult:
    scenario: Scenario
    cast: Cast | None
    runs: dict[str, RunResult] = field(default_factory=dict)
    error: str = ""


class PostsDuringRun:
    """A gateway that sends the customer's `texts` before the run's second model call, one per
    call after that: messages typed while the agent works. `marks` gets each message's turn,
    `together` too (sent before the run ended: its one reply answers them with the first)."""

    def __init__(self, inner, ticket_id: int, texts: list[str], marks: list[int], together: list[int]):
        self.inner, self.ticket_id, self.texts, self.marks, self.calls = inner, ticket_id, texts, marks, 0
        self.together = together

    def call(self, request, **kw):
        from sundry.agent.services import customer_message_post
        from sundry.tickets.models import Ticket

        self.calls += 1
        if self.calls >= 2 and self.texts:
            ticket = Ticket.objects.select_related("ticket_class", "customer").get(pk=self.ticket_id)
            self.marks.append(customer_message_post(ticket=ticket, text=self.texts.pop(0), wake=False).number)
            self.together.append(self.marks[-1])
        return self.inner.call(request, **kw)

    def complete(self, request, **kw):
        return self.call(request, **kw).response

    def __getattr__(self, name):
        return getattr(self.inner, name)


def staff_user():
    user, _ = get_user_model().objects.get_or_create(username=STAFF_USERNAME, defaults={"is_staff": True})
    return user


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("_", " ")).lower()


def describe_card(card) -> str:
    """One card for a report: tool, status (how it was answered, what its call did), title, quoted rules."""
    how = f" ({card.via})" if card.via else ""
    outcome = f" → {card.outcome}" if card.outcome else ""
    rules = "".join(
        f' [quotes rule from turn {r.get("turn")}: "{r.get("text")}"]' for r in card.card.get("rules") or []
    )
    return f"{card.tool} {card.status}{how}{outcome}: {card.card.get('title', '')}{rules}"


def judge_facts(scenario: Scenario, c: Cast, replies_after: list[list[str]]) -> list[FactResult]:
    out = []
    for fact in scenario.facts:
        replies = replies_after[fact.after] if fact.after < len(replies_after) else []
        said = _norm(" ".join(replies))
        missing = []
        for entry in fact.all:
            options = [entry] if isinstance(entry, str) else entry
            if not any(_norm(c.render(o)) in said for o in options):
                missing.append(" | ".join(c.render(o) for o in options))
        bad = [c.render(p) for p in fact.none if _norm(c.render(p)) in said]
        out.append(FactResult(fact, not missing and not bad, missing, bad, replies))
    return out


class Runner:
    """Runs scenarios on the current database's shop under a ticket class."""

    def __init__(self, ticket_class, *, gateway=None, say=lambda s: None):
        from sundry.agent.provider.gateway import Gateway

        self.tclass = ticket_class
        self.gateway = gateway or Gateway()
        self.say = say
        self.shop = ShopIndex.read(ticket_class.approval_rules)
        self.staff = staff_user()

    def run(self, scenario: Scenario, modes: list[str]) -> ScenarioResult:
        try:
            c = cast(scenario, self.shop)
        except LookupError as exc:
            return ScenarioResult(scenario, None, error=str(exc))
        result = ScenarioResult(scenario, c)
        order = [REFERENCE] + [m for m in modes if m != REFERENCE] if REFERENCE in modes else list(modes)
        for name in order:
            result.runs[name] = self.run_mode(scenario, c, MODES[name])
        ref = result.runs.get(REFERENCE)
        for name, run in result.runs.items():
            if ref is not None and name != REFERENCE:
                run.damage_lost, run.damage_extra = fx.damage(ref.effects, run.effects, c)
        return result

    def run_mode(self, scenario: Scenario, c: Cast, mode: Mode) -> RunResult:
        from sundry.core.background import wait_idle

        cp = fx.checkpoint()
        started = time.perf_counter()
        try:
            with override_settings(BACKGROUND_MODE="deferred"), compaction_listener(mode.compaction != "off"):
                return self._run(scenario, c, mode, cp, started)
        finally:
            wait_idle()
            fx.undo(cp)

    def _run(self, scenario: Scenario, c: Cast, mode: Mode, cp, started: float) -> RunResult:
        from sundry.agent.loop import agent_run
        from sundry.agent.models import AgentStep, Confirmation, HeldAction
        from sundry.agent.services import (
            customer_message_post,
            held_action_decide,
            staff_note_post,
            staff_reply_post,
            ticket_set_handler,
        )
        from sundry.compaction.models import CompactionRun
        from sundry.compaction.services import compaction_consider
        from sundry.context.services import state_set
        from sundry.core.background import wait_idle
        from sundry.desk.lifecycle import ticket_create
        from sundry.shop.models import Customer
        from sundry.tickets.models import Ticket, Turn

        customer = Customer.objects.get(customer_id=c.customer_id)
        ticket = ticket_create(customer=customer.person, ticket_class=self.tclass, subject=scenario.title)
        gateway = self.gateway
        if mode.baseline:
            gateway = BaselineGateway(
                self.gateway, ticket.pk, self.tclass.description, mode.baseline, tokenizer=self.tclass.working_model
            )

        def fresh() -> Ticket:
            return Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk)

        def work(during: list[str] = ()) -> None:
            if fresh().handler == Ticket.Handler.AGENT:
                run_gateway = PostsDuringRun(gateway, ticket.pk, list(during), marks, together) if during else gateway
                agent_run(ticket.pk, gateway=run_gateway)
                if during and run_gateway.texts:  # the run needed a single step: they come after it
                    for i, text in enumerate(run_gateway.texts):
                        marks.append(customer_message_post(ticket=fresh(), text=text, wake=False).number)
                        if i:  # the first was sent after the run had ended; the rest with it, before the next
                            together.append(marks[-1])
                    agent_run(ticket.pk, gateway=gateway)
            wait_idle()  # what the run queued: a compaction, a wake-up that finds nothing left to answer
            if mode.compaction == "every":
                compaction_consider(ticket_id=ticket.pk, force=True)
                wait_idle()

        marks: list[int] = []
        together: list[int] = []  # customer messages sent before the run for the one before them ended
        presses: list[str] = []
        script = scenario.script
        for i, step in enumerate(script):
            if isinstance(step, During):
                continue  # posted by the run of the message before it
            if isinstance(step, Message):
                turn = customer_message_post(ticket=fresh(), text=c.render(message_text(step)), wake=False)
                marks.append(turn.number)
                if isinstance(step, Also):  # sent before the agent answered the one before it
                    together.append(turn.number)
                if not (i + 1 < len(script) and isinstance(script[i + 1], Also)):
                    # A message sent meanwhile comes first: the agent then answers both at once. One
                    # sent while it works reaches the ticket between its steps.
                    during = []
                    for later in script[i + 1 :]:
                        if not isinstance(later, During):
                            break
                        during.append(c.render(later.during))
                    work(during)
                continue
            if isinstance(step, CustomerStep):
                if self._customer(step, fresh, c, presses):
                    work()  # the decision woke the agent: a confirmed call's result, a declined card
                continue
            self._staff(
                step, fresh, c, held_action_decide, ticket_set_handler, staff_reply_post, staff_note_post, state_set
            )
            if step.staff != "take_over" and step.staff != "reply":
                work()

        effects = fx.since(cp, ticket.pk)
        turns = [
            (n, a, t)
            for n, a, t, p in Turn.objects.filter(ticket=ticket, kind=Turn.Kind.MESSAGE)
            .order_by("number")
            .values_list("number", "author", "text", "payload")
            if (p or {}).get("via") != HANDED_OFF  # Sundry's hand-off after a hold states no fact of the agent's
        ]
        replies_after: list[list[str]] = []
        for i, mark in enumerate(marks):
            end = marks[i + 1] if i + 1 < len(marks) else 10**9
            replies_after.append([t for n, a, t in turns if a == Turn.Author.AGENT and mark < n < end])
        steps = list(
            AgentStep.objects.filter(ticket=ticket).order_by("number").values_list("request_tokens", flat=True)
        )
        if isinstance(gateway, BaselineGateway):
            seen, sundry = [b for _, b in gateway.tokens], [s for s, _ in gateway.tokens]
        else:
            seen, sundry = steps, steps
        done = CompactionRun.objects.filter(
            ticket=ticket, status__in=[CompactionRun.Status.SUCCEEDED, CompactionRun.Status.FALLBACK]
        ).count()
        held = [f"{h.tool} {h.status}: {h.reason}" for h in HeldAction.objects.filter(ticket=ticket).order_by("pk")]
        cards = [describe_card(card) for card in Confirmation.objects.filter(ticket=ticket).order_by("pk")]
        return RunResult(
            scenario=scenario.id,
            mode=mode.name,
            effects=effects,
            judgement=fx.judge(scenario.expect, scenario.allow, effects, c),
            facts=judge_facts(scenario, c, replies_after),
            compactions=done,
            steps=len(steps),
            request_tokens=seen,
            sundry_tokens=sundry,
            held=held,
            seconds=time.perf_counter() - started,
            ticket_id=ticket.pk,
            transcript=[(a, t) for _, a, t in turns],
            cards=cards,
            presses=presses,
            read=read_by_customers(ticket.pk, together=together),
            together=together,
        )

    def _customer(self, step: CustomerStep, fresh, c: Cast, presses: list[str]) -> bool:
        """Confirm or Not now on the cards the customer's page shows, oldest first (`ignore`: none).
        Whether anything was decided (and so the agent was woken)."""
        from sundry.agent.cardstore import open_cards
        from sundry.agent.guards.cards import entity_ids_of
        from sundry.agent.models import Confirmation
        from sundry.agent.services import ConfirmationError, confirmation_decide

        if step.customer == "ignore":
            return False
        number = c.orders[step.order].number if step.order else None
        decided = False
        for card in open_cards(fresh()):
            if number is not None and number not in entity_ids_of(card.card):
                continue
            try:
                confirmation_decide(
                    card_id=card.pk,
                    ticket=fresh(),
                    confirm=step.customer == "confirm",
                    digest=card.digest,
                    via=Confirmation.Via.BUTTON,
                    wake=False,
                )
                decided = True
            except ConfirmationError as exc:  # answered or replaced meanwhile: the page would say so
                presses.append(f"{step.customer} on card #{card.pk} ({card.card.get('title', card.tool)}): {exc}")
        return decided

    def _staff(self, step: Staff, fresh, c: Cast, decide, set_handler, reply, note, state_set) -> None:
        from sundry.agent.models import HeldAction
        from sundry.context.models import Source

        ticket = fresh()
        if step.staff in ("approve", "reject"):
            for held in HeldAction.objects.filter(ticket=ticket, status=HeldAction.Status.PENDING).order_by("pk"):
                decide(held_id=held.pk, ticket=fresh(), approve=step.staff == "approve", user=self.staff, wake=False)
        elif step.staff == "take_over":
            set_handler(ticket=ticket, handler="staff", user=self.staff)
        elif step.staff == "hand_back":
            set_handler(ticket=ticket, handler="agent", user=self.staff)
        elif step.staff == "reply":
            reply(ticket=ticket, text=c.render(step.text), user=self.staff)
        elif step.staff == "note":
            note(ticket=ticket, text=c.render(step.text), user=self.staff)
        elif step.staff == "set_state":
            state_set(
                ticket=ticket,
                name=step.field,
                value=c.render(step.value),
                turn=ticket.last_turn_number,
                source=Source.STAFF,
                confirmed=True,
                user=self.staff,
            )
