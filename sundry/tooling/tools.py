"""The tool interface every agent tool implements.

A tool has pydantic argument and result models. Fields that carry identifiers
are marked with `IdField(kind)`: the ID guard checks marked arguments, and the
ledger harvests marked result fields — by schema, never by scanning prose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import BaseModel

from sundry.tooling.declarations import check_declarations
from sundry.tooling.ids import ID_KIND_KEY, IdField, id_fields, id_owners, iter_ids  # noqa: F401  (the tool interface)


class ToolError(Exception):
    """A tool refused or failed; the message is shown to the model as the tool result."""


@dataclass
class ToolContext:
    """What a running tool may know: the ticket, the turn, the idempotency key."""

    ticket_id: int
    customer_id: str
    turn: int
    idempotency_key: str
    actor: str = "agent"


@dataclass
class Tool:
    name: str
    description: str
    args_model: type[BaseModel]
    result_model: type[BaseModel]
    run: Callable[[ToolContext, BaseModel], BaseModel]
    side_effect: bool = False
    # A resolving tool completes something with consequences (money moved, a
    # return booked, a reply sent): compaction may only start after one.
    resolves: bool = False
    # Argument naming the object a side effect acts on, for repeat detection.
    target_arg: str | None = None
    # For a side effect without a target: the arguments that make two calls the same
    # write (a booking: passengers and flights); empty means every argument.
    repeat_key: tuple[str, ...] = ()
    reversible: bool = True
    # Local tools change Sundry's own lanes (pin a rule, label an entity)
    # rather than the shop.
    local: bool = False
    # What the customer must have asked for before this runs without staff
    # ("refund", "cancel", "return", "replace"; see agent.consent). None: no consent needed.
    consent_action: str | None = None
    # Arguments whose text reaches the customer (a reply, an email): checked for internal-only text.
    customer_text: tuple[str, ...] = ()
    # For a tool whose words depend on the ticket's domain (`record_fact` names the domain's state
    # fields): its spec for a domain. None: one spec in every domain.
    spec_for: Callable[[Any], dict] | None = None

    def spec(self, domain=None) -> dict:
        """What the model is offered: for `domain` (a `tooling.domain.Domain`) when the tool's words depend on it."""
        if domain is not None and self.spec_for is not None:
            return self.spec_for(domain)
        return {"name": self.name, "description": self.description, "parameters": self.args_model.model_json_schema()}

    @property
    def id_args(self) -> dict[str, str]:
        return id_fields(self.args_model)


REGISTRY: dict[str, Tool] = {}

_NAME_LIST = re.compile(r"[\s,]+")


def name_list(text: str) -> list[str]:
    """Tool names from a comma- or space-separated list (an admin's allow or deny field), in order, each once."""
    return list(dict.fromkeys(n for n in _NAME_LIST.split(text or "") if n))


# Sundry's reply tool: a call to it is the agent's message to the customer (a domain may offer it).
REPLY_TOOL = "reply_to_customer"


def register(tool: Tool) -> Tool:
    if tool.name in REGISTRY:
        raise ValueError(f"tool {tool.name} registered twice")
    check_declarations(tool.result_model)
    REGISTRY[tool.name] = tool
    return tool
