"""`python -m bench.visits`: which of Sundry's files one agent run visits.

A customer asks where an order is; the offline model looks it up and replies (three steps, in a
throwaway database). Counts the distinct files under sundry/ the run enters, by folder, and the
moves between files (a call into another file or a return to one): a figure for how far one
run's path wanders through the code (docs/architecture.md).
"""

import os
import sys
from pathlib import Path


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sundry.settings")
    import django

    django.setup()
    import sundry
    from sundry.agent.loop import agent_run
    from sundry.agent.services import customer_message_post
    from sundry.desk.lifecycle import ticket_create
    from sundry.evals.sources import throwaway_database
    from sundry.shop.demo import ensure_classes
    from sundry.shop.models import Order
    from sundry.shop.seed import generate_shop

    root = str(Path(sundry.__file__).parent) + "/"
    with throwaway_database():
        generate_shop(seed=1, customers=5, orders=40)
        classes = ensure_classes()
        orders = list(Order.objects.select_related("customer").filter(status="delivered").order_by("number")[:2])

        def ticket_asking(order):
            ticket = ticket_create(
                customer=order.customer.person, ticket_class=classes["standard"], subject="Where is it"
            )
            customer_message_post(
                ticket=ticket, text=f"Hi, where is my order {order.number}? It has not come.", wake=False
            )
            return ticket

        agent_run(ticket_asking(orders[0]).pk)  # warm: imports and caches are not the run's path
        ticket = ticket_asking(orders[1])
        files: set[str] = set()
        moves = [0]
        last = [""]

        def profile(frame, event, arg):
            if event not in ("call", "return"):
                return
            name = frame.f_code.co_filename
            if not name.startswith(root) or "/migrations/" in name:
                return
            rel = name[len(root) :]
            files.add(rel)
            if last[0] and last[0] != rel:
                moves[0] += 1
            last[0] = rel

        sys.setprofile(profile)
        try:
            steps = agent_run(ticket.pk)
        finally:
            sys.setprofile(None)
    print(f"steps {steps}; files visited {len(files)}; moves between files {moves[0]}")
    by_folder: dict[str, list[str]] = {}
    for rel in files:
        folder, _, base = rel.rpartition("/")
        by_folder.setdefault(folder or ".", []).append(base)
    for folder, names in sorted(by_folder.items()):
        print(f"  {folder}: {len(names)}  {' '.join(sorted(names))}")


if __name__ == "__main__":
    main()
