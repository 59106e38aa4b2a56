"""Harness domains: how each tool vocabulary marks its identifiers.

`DOMAINS[name]` for τ²-bench's retail, airline and telecom (production
declarations from plain data, see `tau2`) and Sundry's own demo shop (its
registered production domain, see `demo_shop`).
"""

from __future__ import annotations

from sundry.evals.domains.base import DeclarativeDomain, Planted
from sundry.evals.domains.tau2 import AIRLINE, RETAIL, TELECOM, ToolDesc
from sundry.tooling.domain import select


def _demo():
    from sundry.evals.domains.demo_shop import DEMO_SHOP

    return DEMO_SHOP


class _Domains(dict):
    """The demo shop loads lazily: it imports the tool registry, which a pure import need not."""

    def __missing__(self, key):
        if key == "demo_shop":
            self[key] = _demo()
            return self[key]
        raise KeyError(f"unknown domain {key!r}; known: retail, airline, telecom, demo_shop")

    def items(self):
        self["demo_shop"]
        return super().items()


DOMAINS = _Domains(retail=RETAIL, airline=AIRLINE, telecom=TELECOM)

__all__ = ["DOMAINS", "DeclarativeDomain", "Planted", "ToolDesc", "select"]
