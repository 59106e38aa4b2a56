"""The long conversation reported in issue 15, replayed on the seeded demo shop through the real loop.

The shop is the one `bin/serve` seeds (`generate_shop` with the demo seed and its
default size). The customer is picked by what the conversation needs — a
delivered order holding an Air Fryer, two parcels in transit, a delivered order
holding a lamp, another delivered order, one not yet shipped — never by login
name. Each message is posted as the customer page posts it and answered by
`agent_run` with the class's model (the offline one); background work (the
compactions production's trigger queues) is deferred and run in this thread
after every run, so the replay is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.test.utils import override_settings

# As close to the report as the seed allows: the cracked air fryer, "never email me, phone only",
# 40.00 refunded for the damage, where are two other orders, what else did I order, a lamp
# returned from a third, 25.00 refunded on a fourth, a fifth cancelled, tracking in between —
# then, after several compactions, "Is the refund for the air fryer done?".
SCRIPT = [
    "Hi, the {fryer_item} from {fryer} arrived cracked.",
    "Please never email me, phone only.",
    "I'd like a refund of 40.00 {fryer_currency} for the damage, I'll keep it.",
    "Where is {transit1}?",
    "And where is {transit2}?",
    "What else did I order?",
    "I want to return the {lamp_item} from {lamp}, it's too dim.",
    "Where is {transit1} now?",
    "Please refund 25.00 {fourth_currency} on {fourth}, the {fourth_item} was scratched.",
    "Thanks.",
    "Is {transit2} still on its way?",
    "Please cancel {placed}, I ordered it by mistake.",
    "I only check my phone after 6pm.",
    "Which carrier has {transit1}?",
    "OK.",
    "Where is {transit2} now?",
    "Is the refund for the air fryer done?",
    "And the return for the lamp?",
    "Has the cancellation gone through?",
    "Where is {transit1}?",
    "Is the refund for the air fryer approved yet?",
    "How much was it?",
    "Thanks for your help.",
    "Bye.",
]
STATUS_QUESTION = SCRIPT.index("Is the refund for the air fryer done?")
SECOND_STATUS_QUESTION = SCRIPT.index("Is the refund for the air fryer approved yet?")


@dataclass(frozen=True)
class Cast:
    customer_id: str
    fryer: str
    fryer_item: str
    fryer_currency: str
    transit1: str
    transit2: str
    lamp: str
    lamp_item: str
    fourth: str
    fourth_item: str
    fourth_currency: str
    placed: str

    @property
    def asked_about(self) -> set[str]:
        """The orders the customer asks to have money moved on (the cancellation refunds its order)."""
        return {self.fryer, self.fourth, self.placed}

    def messages(self) -> list[str]:
        return [m.format(**self.__dict__) for m in SCRIPT]


def seed_demo_shop():
    """The shop `bin/serve` seeds, and its ticket classes; returns the Standard class."""
    from sundry.shop.demo import ensure_classes
    from sundry.shop.seed import generate_shop

    generate_shop(seed=settings.DEMO_SEED)
    return ensure_classes()["standard"]


def pick_customer() -> Cast:
    """The first customer (by ID) whose orders fit the conversation."""
    from sundry.shop.models import Customer, Order

    for customer in Customer.objects.order_by("customer_id").prefetch_related(
        "orders__items__product", "orders__parcels"
    ):
        orders = sorted(customer.orders.all(), key=lambda o: o.number)
        if len(orders) < 6:
            continue

        def first(o):
            return o.items.all()[0].product.name

        def names(o):
            return [i.product.name for i in o.items.all()]

        delivered = [o for o in orders if o.status == Order.Status.DELIVERED]
        # "The air fryer" names one order: the customer bought one.
        fryers = [o for o in orders if any("Air Fryer" in n for n in names(o))]
        fryer = fryers[0] if len(fryers) == 1 and fryers[0] in delivered and "Air Fryer" in first(fryers[0]) else None
        lamp = next((o for o in delivered if o is not fryer and len(names(o)) == 1 and "Lamp" in first(o)), None)
        transit = [
            o
            for o in orders
            if o.status == Order.Status.SHIPPED and any(p.status == "in_transit" for p in o.parcels.all())
        ]
        placed = next((o for o in orders if o.status == Order.Status.PLACED), None)
        fourth = next(
            (
                o
                for o in delivered
                if o not in (fryer, lamp)
                and o.total_cents >= 5000
                and not any("Lamp" in n or "Air Fryer" in n for n in names(o))
            ),
            None,
        )
        if not (fryer and lamp and placed and fourth and len(transit) >= 2):
            continue
        return Cast(
            customer.customer_id,
            fryer.number,
            first(fryer),
            fryer.currency,
            transit[0].number,
            transit[1].number,
            lamp.number,
            first(lamp),
            fourth.number,
            first(fourth),
            fourth.currency,
            placed.number,
        )
    raise LookupError("no customer of the seeded shop has the orders the conversation needs")


def replay(ticket, cast: Cast, *, start: int = 0, stop: int | None = None, gateway=None) -> list[list[str]]:
    """Post the script's messages `start:stop` on `ticket`; the agent's replies to each message.
    `gateway`: a stand-in for the class's model (a negative control); by default the class's own.

    Staff watch the desk: a call the class holds for approval (the cancellation's refund joins the
    customer's running total over the threshold) is approved by a staff member, as the customer
    asked for it, and the agent goes on."""
    from django.contrib.auth import get_user_model

    from sundry.agent.loop import agent_run
    from sundry.agent.models import HeldAction
    from sundry.agent.services import customer_message_post, held_action_decide
    from sundry.core.background import wait_idle
    from sundry.tickets.models import Ticket, Turn

    replies = []
    with override_settings(BACKGROUND_MODE="deferred"):
        for text in cast.messages()[start:stop]:
            fresh = Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk)
            turn = customer_message_post(ticket=fresh, text=text, wake=False)
            agent_run(ticket.pk, gateway=gateway)
            wait_idle()  # what the run queued: the compaction production's trigger asked for
            for held in HeldAction.objects.filter(ticket=ticket, status=HeldAction.Status.PENDING).order_by("pk"):
                staff, _ = get_user_model().objects.get_or_create(
                    username="staff-approver", defaults={"is_staff": True}
                )
                held_action_decide(
                    held_id=held.pk,
                    ticket=Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk),
                    approve=True,
                    user=staff,
                    wake=False,
                )
                agent_run(ticket.pk, gateway=gateway)
                wait_idle()
            replies.append(
                list(
                    Turn.objects.filter(
                        ticket=ticket, kind=Turn.Kind.MESSAGE, author=Turn.Author.AGENT, number__gt=turn.number
                    )
                    .order_by("number")
                    .values_list("text", flat=True)
                )
            )
    return replies
