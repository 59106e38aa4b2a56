from django.conf import settings
from django.core.management.base import BaseCommand

from sundry.core.background import wait_idle
from sundry.shop.demo import DEMO_PASSWORD, create_demo_tickets, ensure_canned_replies, ensure_classes, ensure_logins
from sundry.shop.models import Customer
from sundry.shop.seed import generate_shop
from sundry.tickets.models import Ticket


class Command(BaseCommand):
    help = "Seed the demo shop, ticket classes, demo logins and worked demo tickets; print the logins."

    def add_arguments(self, parser):
        parser.add_argument("--if-empty", action="store_true", help="Do nothing that is already there.")
        parser.add_argument("--seed", type=int, default=settings.DEMO_SEED)
        parser.add_argument("--no-work", action="store_true", help="Create tickets without running the agent.")

    def handle(self, *args, if_empty=False, seed=None, no_work=False, **options):
        if not Customer.objects.exists():
            self.stdout.write("Seeding the demo shop …")
            counts = generate_shop(seed=seed)
            self.stdout.write(f"  {counts}")
        ensure_classes()
        logins = ensure_logins()
        if added := ensure_canned_replies():
            self.stdout.write(f"  {added} canned replies for the desk")
        if not (if_empty and Ticket.objects.exists()):
            self.stdout.write("Working the demo tickets with the agent …")
            tickets = create_demo_tickets(work=not no_work)
            for t in tickets:
                t.refresh_from_db()
                self.stdout.write(f"  #{t.pk} {t.subject} ({t.last_turn_number} turns)")

        wait_idle()
        self.stdout.write("Demo logins (password for all: %s):" % DEMO_PASSWORD)
        for login in logins:
            self.stdout.write(f"  {login.username:<10} {login.role:<9} {login.note}")
