"""Agent tools. Importing this package registers the demo shop's tools in REGISTRY.

Local lane tools (pin a rule, label a ledger entry) are registered by
`sundry.context.tools`, not here; `request_staff_follow_up` (follow_up.py) is.
"""

from . import follow_up, shop_tools  # noqa: F401  (registers on import)
