"""Sundry's own agent tools. Importing this package registers them in REGISTRY.

Local lane tools (pin a rule, label a ledger entry) are registered by
`sundry.context.tools`, not here; `request_staff_follow_up` (follow_up.py) is.
A domain's tools are registered by the domain (`settings.SUNDRY_DOMAINS`).
"""

from . import follow_up  # noqa: F401  (registers on import)
