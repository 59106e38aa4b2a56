"""Sundry's benchmarks: figures printed for people, never timed tests.

A development package beside the product, not part of it: `pip install .` ships only
`sundry*` (pyproject's package list), so a production image carries none of these
drivers. Run from a checkout: `python -m bench --help` (the figures of
docs/benchmarks.md), `python -m bench.claimsbench`, `python -m bench.streamdelay`.
The harness, the outcome scenarios and `manage.py model_check` stay in
`sundry.evals`: teams run those on their own servers.
"""

import os
from pathlib import Path

# The benchmarks start Python processes of their own (`-m bench.soakserver`, a Celery worker
# with `-A bench.benchworker`); the checkout this package lives in must be importable there too.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, os.environ.get("PYTHONPATH", "")) if p)
