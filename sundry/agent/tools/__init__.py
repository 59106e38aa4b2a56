"""Agent tools. Importing this package registers the demo shop's tools in REGISTRY.

Local lane tools (pin a rule, label a ledger entry) are registered by
`sundry.context.tools`, not here.
"""

from . import shop_tools  # noqa: F401  (registers on import)
