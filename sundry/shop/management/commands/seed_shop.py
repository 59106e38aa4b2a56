"""Seed the demo shop deterministically: `manage.py seed_shop --seed N`."""

import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from sundry.shop.models import Order
from sundry.shop.seed import SeedError, generate_shop, mutation_hit_share


class Command(BaseCommand):
    help = "Fill the demo shop with deterministic data from a seed (same seed, same rows)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--seed",
            type=int,
            default=settings.DEMO_SEED,
            help=f"Random seed (default: SUNDRY_DEMO_SEED, currently {settings.DEMO_SEED}).",
        )
        parser.add_argument("--customers", type=int, default=600)
        parser.add_argument("--orders", type=int, default=6000)
        parser.add_argument(
            "--replace",
            action="store_true",
            help="Delete all existing shop rows first (otherwise refuses if any exist).",
        )

    def handle(self, *args, seed, customers, orders, replace, **options):
        started = time.perf_counter()
        try:
            counts = generate_shop(seed=seed, customers=customers, orders=orders, replace=replace)
        except SeedError as exc:
            raise CommandError(str(exc)) from exc
        elapsed = time.perf_counter() - started

        self.stdout.write(f"Seeded the shop from seed {seed} in {elapsed:.2f}s:")
        width = max(len(k) for k in counts)
        for kind, count in counts.items():
            self.stdout.write(f"  {kind:<{width}}  {count:>7,}")
        numbers = set(Order.objects.values_list("number", flat=True))
        share = mutation_hit_share(numbers)
        self.stdout.write(
            f"Order-number mutation-hit share: {share:.3f} "
            f"(of all one-digit slips of the {len(numbers):,} order numbers, this share names another real order)"
        )
