"""Seed a fault test's database: `python -m tests.faults.seed TICKETS HANDLER` with DATABASE_URL set.

One customer who logs in with a password, one paid order per ticket, a ticket class whose
working model is the stand-in model server. Prints what the test needs as JSON.
"""

from __future__ import annotations

import json
import sys

import django

PASSWORD = "faults-password-1"


def main(count: int, handler: str) -> dict:
    django.setup()
    from django.contrib.auth import get_user_model

    from sundry.desk.lifecycle import ticket_create
    from sundry.tickets.models import Ticket, TicketClass
    from tests.factories import CustomerFactory, paid_order

    user = get_user_model().objects.create_user("faults-customer", password=PASSWORD)
    get_user_model().objects.create_user("faults-staff", password=PASSWORD, is_staff=True)
    customer = CustomerFactory(user=user)
    tclass = TicketClass.objects.create(
        name="Faults", slug="faults", working_model="openai-compatible:faults", approval_rules={}
    )
    tickets, orders = [], []
    for _ in range(count):
        order = paid_order(customer=customer)
        ticket = ticket_create(customer=customer.person, ticket_class=tclass, subject=f"About {order.number}")
        if handler != Ticket.Handler.AGENT:
            Ticket.objects.filter(pk=ticket.pk).update(handler=handler)
        tickets.append(ticket.pk)
        orders.append(order.number)
    return {
        "username": user.username,
        "staff_username": "faults-staff",
        "password": PASSWORD,
        "tickets": tickets,
        "orders": orders,
    }


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]), sys.argv[2])))
