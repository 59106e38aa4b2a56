"""`python -m bench [options]`: print Sundry's performance figures (see bench/command.py and
docs/benchmarks.md). Run from a checkout, with the project's settings and services."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sundry.settings")
    import django

    django.setup()  # the figures drive the real models, loop and web process
    from bench.command import Command

    Command().run_from_argv(["python -m", "bench", *sys.argv[1:]])


if __name__ == "__main__":
    main()
