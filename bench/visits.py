"""Which of Sundry's files one agent run visits: a customer asks about an order, the offline
model looks it up and replies. Counts distinct files under sundry/, and the moves between
files (a call into another file, or a return to one) while the run works."""
import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sundry.settings")
import django
django.setup()
from pathlib import Path
import sundry
from sundry.evals.sources import throwaway_database

ROOT = str(Path(sundry.__file__).parent) + "/"

def main():
    with throwaway_database():
        from sundry.shop.seed import generate_shop
        from sundry.shop.models import Order
        try:
            from sundry.desk.demo import ensure_classes
        except ImportError:
            from sundry.tickets.demo import ensure_classes
        try:
            from sundry.desk.lifecycle import ticket_create
        except ImportError:
            from sundry.tickets.services import ticket_create
        from sundry.agent.services import customer_message_post
        from sundry.agent.loop import agent_run
        generate_shop(seed=1, customers=5, orders=40)
        classes = ensure_classes()
        order = Order.objects.select_related("customer").filter(status="delivered").order_by("number").first()
        ticket = ticket_create(customer=order.customer, ticket_class=classes["standard"], subject="Where is it")
        customer_message_post(ticket=ticket, text=f"Hi, where is my order {order.number}? It has not come.", wake=False)
        agent_run(ticket.pk)  # warm: imports, caches
        other = Order.objects.select_related("customer").filter(status="delivered").order_by("number")[1]
        ticket = ticket_create(customer=other.customer, ticket_class=classes["standard"], subject="Where is it")
        customer_message_post(ticket=ticket, text=f"Hi, where is my order {other.number}? It has not come.", wake=False)
        files, moves, last = set(), 0, [None]
        def prof(frame, event, arg):
            if event not in ("call", "return"):
                return
            f = frame.f_code.co_filename
            if not f.startswith(ROOT) or "/migrations/" in f:
                return
            rel = f[len(ROOT):]
            files.add(rel)
            if last[0] is not None and last[0] != rel:
                nonlocal_moves[0] += 1
            last[0] = rel
        nonlocal_moves = [0]
        sys.setprofile(prof)
        steps = agent_run(ticket.pk)
        sys.setprofile(None)
        print(f"steps {steps}; files visited {len(files)}; moves between files {nonlocal_moves[0]}")
        by_dir = {}
        for f in files:
            by_dir.setdefault(f.rsplit("/", 1)[0] if "/" in f else ".", []).append(f.rsplit("/", 1)[-1])
        for d, fs in sorted(by_dir.items()):
            print(f"  {d}: {len(fs)}  {' '.join(sorted(fs))}")

main()
