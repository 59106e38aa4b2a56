"""Demo data a new user sees at once: classes, logins and worked tickets.

Tickets are worked by the real agent loop (on whatever model the class
names — the offline model by default), so the desk shows real lanes, guards
and tool calls rather than canned text.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from sundry.agent.loop import agent_run
from sundry.agent.models import HeldAction
from sundry.agent.services import customer_message_post, held_action_decide
from sundry.desk.lifecycle import ticket_create
from sundry.people.models import Customer as Person
from sundry.shop.models import Customer, Order
from sundry.tickets.models import CannedReply, Ticket, TicketClass

DEMO_PASSWORD = "sundry-demo"


@dataclass(frozen=True)
class Login:
    username: str
    role: str
    note: str


def ensure_classes() -> dict[str, TicketClass]:
    standard, _ = TicketClass.objects.get_or_create(
        slug="standard",
        defaults=dict(
            name="Standard",
            token_budget=8000,
            trigger_fraction=0.8,
            recent_turns_kept=8,
            description="Everyday orders: tracking, refunds, returns, cancellations.",
            approval_rules={"issue_refund": {"above": {"USD": 10000, "EUR": 10000, "GBP": 8000, "INR": 800000}}},
        ),
    )
    extended, _ = TicketClass.objects.get_or_create(
        slug="extended",
        defaults=dict(
            name="Extended",
            token_budget=32000,
            trigger_fraction=0.8,
            recent_turns_kept=16,
            pinned_rules_cap=1500,
            description="Complex or escalated cases with long histories.",
            approval_rules={
                "issue_refund": {"above": {"USD": 20000, "EUR": 20000, "GBP": 16000, "INR": 1600000}},
                "cancel_order": {},
            },
        ),
    )
    return {"standard": standard, "extended": extended}


# Staff logins: (username, role, first name, what they do). First names: staff sign their replies with
# them (and canned replies fill in {my_first_name}).
STAFF_LOGINS = (
    ("admin", "admin", "Alex", "tunes ticket classes; also works the desk"),
    ("staff", "staff", "Sam", "works the desk"),
    ("staff2", "staff", "Robin", "works the desk"),
)
CUSTOMER_LOGINS = ("customer1", "customer2", "customer3")


def ensure_logins() -> list[Login]:
    User = get_user_model()
    logins = []

    def user(username, **flags):
        u, created = User.objects.get_or_create(username=username, defaults=flags)
        if created:
            u.set_password(DEMO_PASSWORD)
            u.save()
        return u

    for name, role, first, note in STAFF_LOGINS:
        user(name, is_staff=True, is_superuser=role == "admin", first_name=first)
        logins.append(Login(name, role, note))
    # A login is linked to a customer once and stays: re-linking it on a later run (the
    # best demo customers change as orders move on) would hand the login someone else's
    # data and its own tickets to nobody.
    unlinked = (c for c in _demo_customers() if c.user_id is None)
    for name in CUSTOMER_LOGINS:
        u = user(name)
        customer = Customer.objects.filter(user=u).first()
        if customer is None:
            customer = next(unlinked, None)
            if customer is None:
                continue  # a shop too small for three demo customers
            customer.user = u
            customer.save(update_fields=["user"])
        logins.append(Login(u.username, "customer", f"{customer.name} ({customer.customer_id})"))
    return logins


def seeded_logins() -> list[Login]:
    """The demo logins this database holds, for the sign-in page of a development server. None under
    production settings or with DEBUG off: the password is published, and a real desk never shows it."""
    if not settings.DEBUG or settings.PRODUCTION:
        return []
    staff = set(
        get_user_model()
        .objects.filter(username__in=[name for name, *_ in STAFF_LOGINS], is_staff=True, is_active=True)
        .values_list("username", flat=True)
    )
    customers = dict(
        Person.objects.filter(user__username__in=CUSTOMER_LOGINS, user__is_active=True).values_list(
            "user__username", "name"
        )
    )
    return [Login(name, role, note) for name, role, _, note in STAFF_LOGINS if name in staff] + [
        Login(name, "customer", customers[name]) for name in CUSTOMER_LOGINS if name in customers
    ]


# Replies staff insert on the desk (Canned reply → Insert…) and edit before sending. Placeholders are
# filled from the ticket (sundry.desk.canned); one the ticket has no value for stays as a note.
CANNED_REPLIES = [
    (
        "Taking over from the assistant",
        "Hi {customer_first_name}, I'm {my_first_name} from the support team. I've taken over from our "
        "assistant and I'm looking at order {order_number} now; I'll reply here shortly.",
    ),
    (
        "Refund on its way",
        "Hi {customer_first_name}, the refund on order {order_number} has been issued. It reaches your original "
        "payment method within 5 to 10 working days, depending on your bank.",
    ),
    (
        "Parcel delayed",
        "Hi {customer_first_name}, I've checked with the carrier: order {order_number} is delayed in transit. "
        "If it hasn't arrived within 5 working days, reply here and we'll send a replacement or refund it.",
    ),
    (
        "Which order?",
        "Hi {customer_first_name}, could you tell me the order number? It starts with SU- and is in your "
        "order confirmation email.",
    ),
    (
        "Resolving the ticket",
        "Thanks, {customer_first_name}. I'm marking ticket #{ticket_number} as resolved; if anything else comes "
        "up, just reply here and it reopens. — {my_first_name}",
    ),
]


def ensure_canned_replies() -> int:
    """The demo's canned replies, for every class. Seeded once: where the desk has any canned replies,
    none are added, so staff's edits and removals stand."""
    if CannedReply.objects.exists():
        return 0
    CannedReply.objects.bulk_create(CannedReply(title=title, body=body) for title, body in CANNED_REPLIES)
    return len(CANNED_REPLIES)


def _demo_customers() -> list[Customer]:
    # Customers with several delivered orders, one on its way and one not yet shipped make the
    # best demos: every script (track, refund, cancel, the long one) then has a real case.
    # Smaller shops may have none such; customers with two delivered orders fill in.
    from django.db.models import Count, Q

    def having(status: str):
        return Count("orders", filter=Q(orders__status=status))

    ranked = (
        Customer.objects.annotate(delivered=having("delivered"), shipped=having("shipped"), placed=having("placed"))
        .filter(delivered__gte=2)
        .order_by("customer_id")
    )
    complete = list(ranked.filter(shipped__gte=1, placed__gte=1)[:3])
    rest = [c for c in ranked[: 3 + len(complete)] if c not in complete]
    return (complete + rest)[:3]


SHORT_SCRIPTS = [
    ("Where is my parcel?", ["Hi, where is my order {shipped}? It has been a while."]),
    (
        "Refund for a damaged item",
        [
            "Hello, the {delivered_item} from order {delivered} arrived broken. "
            "Phone only, never email please. I would like my money back."
        ],
    ),
    ("Cancel an order", ["Please cancel order {placed}, I ordered it by mistake."]),
]

LONG_SCRIPT = [
    "Hi, I have a few problems with my recent orders.",
    "First, the {delivered_item} from {delivered} arrived damaged. Phone only, never email please.",
    "I'd like a refund of {partial} for the damage, I'll keep it.",
    "Thanks. Also, where is order {shipped}?",
    "OK. Can you tell me what else I ordered recently?",
    "I want to return the items from {delivered2}, they don't fit.",
    "I don't want a replacement, just the return please.",
    "Where is my parcel for {shipped} now?",
    "And could you check {delivered} again for me?",
    "The {delivered_item} is still damaged, I want a refund.",
    "Great, thanks. One more: where is {shipped}?",
    "Thanks for your help.",
]


def _facts(customer: Customer) -> dict:
    orders = list(Order.objects.filter(customer=customer).prefetch_related("items__product").order_by("number"))
    by_status = {}
    for o in orders:
        by_status.setdefault(o.status, []).append(o)
    delivered = by_status.get("delivered", [])
    shipped = (by_status.get("shipped") or delivered)[:1]
    placed = (by_status.get("placed") or orders)[:1]
    d1 = delivered[0] if delivered else orders[0]
    d2 = delivered[1] if len(delivered) > 1 else d1
    item = d1.items.first()
    return {
        "delivered": d1.number,
        "delivered2": d2.number,
        "shipped": shipped[0].number if shipped else d1.number,
        "placed": placed[0].number if placed else d1.number,
        "delivered_item": item.product.name.lower() if item else "item",
        "partial": f"{max(1, d1.total_cents // 400)}.00 {d1.currency}",
    }


def _approve_held(ticket) -> None:
    """In the demo, a staff member approves what the agent held, as a desk would."""
    staff = get_user_model().objects.filter(username="staff").first()
    for held in HeldAction.objects.filter(ticket=ticket, status=HeldAction.Status.PENDING):
        held_action_decide(held_id=held.pk, ticket=ticket, approve=True, user=staff, wake=False)
        agent_run(ticket.pk)


def create_demo_tickets(*, work: bool = True) -> list[Ticket]:
    classes = ensure_classes()
    customers = _demo_customers()
    tickets = []
    for customer, (subject, messages) in zip(customers, SHORT_SCRIPTS):
        facts = _facts(customer)
        ticket = ticket_create(customer=customer.person, ticket_class=classes["standard"], subject=subject)
        for text in messages:
            with transaction.atomic():
                customer_message_post(ticket=ticket, text=text.format(**facts), wake=not work)
            if work:
                agent_run(ticket.pk)
        tickets.append(ticket)
    if customers:
        customer = customers[0]
        facts = _facts(customer)
        ticket = ticket_create(
            customer=customer.person, ticket_class=classes["standard"], subject="Several problems with recent orders"
        )
        for text in LONG_SCRIPT:
            customer_message_post(ticket=ticket, text=text.format(**facts), wake=not work)
            if work:
                agent_run(ticket.pk)
                _approve_held(ticket)
        tickets.append(ticket)
    return tickets
