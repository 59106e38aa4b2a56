"""A ticket class's approval rules: which tool calls wait for staff, and above what amount.

Stored as JSON on `TicketClass.approval_rules`; the admin form validates with
`ApprovalRules` and the approval guard reads a tool's entry with `rule_for`, so
both go by one definition:

    {"<tool>": {}}                                         every call is held
    {"<tool>": {"above_cents": 10000}}                     held above 100.00 in any currency
    {"<tool>": {"above": {"USD": 20000, "INR": 1500000}}}  per currency; a currency not
                                                           listed is held, unless
                                                           above_cents is also given

Amounts are minor units of the currency (cents, paise). The tools a class may
hold are the domain's writes (`ToolDecl.may_hold`), named in its declaration.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, RootModel, ValidationError, ValidationInfo, field_validator

from sundry.tooling.declarations import model_declares
from sundry.tooling.domain import Domain, get_domain
from sundry.tooling.tools import REGISTRY

_CODE = re.compile(r"[A-Z]{3}")


def _minor_units(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError("must be a whole number of minor units, 0 or more (20000 is 200.00 USD)")
    return value


MinorUnits = Annotated[int, BeforeValidator(_minor_units)]


class ToolApproval(BaseModel):
    """When one tool's calls need staff approval. No threshold at all: always."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    above_cents: MinorUnits | None = None
    above: dict[str, MinorUnits] | None = None

    @field_validator("above")
    @classmethod
    def _currencies(cls, per: dict[str, int] | None) -> dict[str, int] | None:
        if per is None:
            return None
        if not per:
            raise ValueError('must name at least one currency, e.g. {"USD": 20000, "INR": 1500000}')
        for code in per:
            if not _CODE.fullmatch(code):
                raise ValueError(f"'{code}' is not a currency code (three capital letters, e.g. USD)")
        return per

    def limit(self, currency: str) -> int | None:
        """The amount (minor units) above which a call in `currency` is held; None: always held.

        `above` sets a threshold per currency, since 200.00 means different things in
        USD and INR; `above_cents` is the threshold for any currency `above` does not
        list. A currency with neither is held: staff decide what it is worth.
        """
        if self.above and currency.upper() in self.above:
            return self.above[currency.upper()]
        return self.above_cents

    @property
    def per_currency_only(self) -> bool:
        """Thresholds set per currency with no fallback: other currencies are always held."""
        return bool(self.above) and self.above_cents is None


def example(domain: Domain | None = None) -> str:
    """A rule for the admin's help text, naming one of the domain's tools."""
    domain = domain or get_domain()
    holdable = domain.approvable_tools()
    refund = next((n for n in holdable if domain.tools[n].refund), None)
    if refund:
        return f'{{"{refund}": {{"above": {{"USD": 20000, "INR": 1500000}}}}}}'
    return f'{{"{holdable[0]}": {{}}}}' if holdable else "{}"


class ApprovalRules(RootModel[dict[str, ToolApproval]]):
    """A class's rules: tool name -> ToolApproval. Every name must be a tool the domain lets a class
    hold (validation context `domain`; the default domain otherwise)."""

    @field_validator("root")
    @classmethod
    def _known_tools(cls, rules: dict[str, ToolApproval], info: ValidationInfo) -> dict[str, ToolApproval]:
        domain = (info.context or {}).get("domain") or get_domain()
        known = set(domain.approvable_tools()) | set((info.context or {}).get("known", ()))  # and a class's servers'
        unknown = sorted(set(rules) - known)
        if unknown:
            raise ValueError(
                f"{', '.join(repr(t) for t in unknown)} {'is not a tool' if len(unknown) == 1 else 'are not tools'}"
                f" a class can hold for approval. Known tools: {', '.join(sorted(known))}"
            )
        return rules


def problems(data: Any, domain: Domain | None = None, known: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """What is wrong with `data` as approval rules, one sentence each; empty when it is valid.
    `known`: tool names beyond the domain's (a class's tool servers list them)."""
    if not isinstance(data, dict):
        return [f"Approval rules must be an object of tool name → options, e.g. {example(domain)}."]
    try:
        ApprovalRules.model_validate(data, context={"domain": domain, "known": known})
    except ValidationError as exc:
        return [_sentence(error) for error in exc.errors()]
    return []


def _sentence(error: dict) -> str:
    loc = [str(part) for part in error["loc"] if part != "root"]
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return f"'{loc[0]}': unknown option '{loc[-1]}'; only above_cents and above are allowed."
    if error["type"] == "model_type":
        return f"'{loc[0]}': options must be an object ({{}} for always, or {{\"above_cents\": 10000}})."
    if error["type"] == "dict_type":
        return f"'{loc[0]}': above must be an object of currency → minor units, e.g. {{\"USD\": 20000}}."
    if not loc:
        return message + "."
    where = f"'{loc[0]}'" + (f" {'.'.join(loc[1:])}" if len(loc) > 1 else "")
    return f"{where}: {message}."


def rule_for(data: Any, tool: str) -> ToolApproval | None:
    """The stored rule for `tool`, for the guard; None when the tool needs no approval.

    Stored rules were validated when saved, but a rule that no longer validates
    (edited outside the admin) holds every call of its tool: an unreadable
    threshold must not let a call through.
    """
    if not data:
        return None
    if not isinstance(data, dict):
        return ToolApproval()
    if tool not in data:
        return None
    try:
        return ToolApproval.model_validate(data[tool] if data[tool] is not None else {})
    except ValidationError:
        return ToolApproval()


def money_rules(data: Any, moving: Iterable[str] | None = None) -> list[ToolApproval]:
    """The rules of the tools whose results move money, for a call that moves money but whose tool
    has no rule of its own: a cancellation's refund is held by the refund threshold.

    `moving`: the names of the class's tools that move money, as its declarations say (a tool
    server's included); without it, the in-process tools' result models say (`moves_money`)."""
    if not data:
        return []
    names = data if isinstance(data, dict) else REGISTRY
    if moving is not None:
        known = set(moving)
        return [rule for name in names if name in known and (rule := rule_for(data, name)) is not None]
    return [
        rule
        for name in names
        if name in REGISTRY
        and model_declares(REGISTRY[name].result_model, "moves_money")
        and (rule := rule_for(data, name)) is not None
    ]
