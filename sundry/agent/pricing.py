"""What a model call cost, from a small table of list prices.

Prices are USD per million tokens (input, output), as published by the
providers; update the table when they change. A model that is not in the table
costs 0 and is reported as unpriced, so a missing price shows up in the admin
figures instead of passing as "free". The offline model really is free.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class Price:
    input_per_million: Decimal
    output_per_million: Decimal


def _p(inp: str, out: str) -> Price:
    return Price(Decimal(inp), Decimal(out))


# Keys are model names without the provider prefix. Lookup takes the longest
# key that is a prefix of the name at a "-" boundary, so dated snapshots
# ("gpt-4.1-mini-2025-04-14", "claude-3-5-haiku-20241022") find their family
# while "gpt-4.1-mini" never falls back to "gpt-4.1".
PRICES: dict[str, Price] = {
    "gpt-4.1": _p("2.00", "8.00"),
    "gpt-4.1-mini": _p("0.40", "1.60"),
    "gpt-4.1-nano": _p("0.10", "0.40"),
    "gpt-4o": _p("2.50", "10.00"),
    "gpt-4o-mini": _p("0.15", "0.60"),
    "gpt-5": _p("1.25", "10.00"),
    "gpt-5-mini": _p("0.25", "2.00"),
    "gpt-5-nano": _p("0.05", "0.40"),
    "o3": _p("2.00", "8.00"),
    "o4-mini": _p("1.10", "4.40"),
    "claude-3-5-haiku": _p("0.80", "4.00"),
    "claude-3-5-sonnet": _p("3.00", "15.00"),
    "claude-3-7-sonnet": _p("3.00", "15.00"),
    "claude-haiku-4-5": _p("1.00", "5.00"),
    "claude-sonnet-4": _p("3.00", "15.00"),
    "claude-sonnet-4-5": _p("3.00", "15.00"),
    "claude-opus-4": _p("15.00", "75.00"),
    "claude-opus-4-1": _p("15.00", "75.00"),
    "claude-opus-4-5": _p("5.00", "25.00"),
}

FREE = _p("0", "0")


@dataclass(frozen=True)
class Cost:
    usd: Decimal
    # False when the model has no price in the table and `usd` is a placeholder 0.
    priced: bool


def _bare(model: str) -> str:
    # "openai:gpt-4.1" -> "gpt-4.1"; "openai-compatible:org/llama" keeps the path.
    return model.split(":", 1)[1] if ":" in model else model


def price_for(model: str) -> Price | None:
    """The list price of `model`, or None when it is not in the table."""
    if model == "offline":
        return FREE
    name = _bare(model).lower()
    best = None
    for key in PRICES:
        if (name == key or name.startswith(key + "-")) and (best is None or len(key) > len(best)):
            best = key
    return PRICES[best] if best else None


def cost(model: str, input_tokens: int, output_tokens: int) -> Cost:
    price = price_for(model)
    if price is None:
        return Cost(Decimal(0), priced=False)
    usd = (price.input_per_million * input_tokens + price.output_per_million * output_tokens) / MILLION
    # AgentStep.cost_usd keeps six decimal places.
    return Cost(usd.quantize(Decimal("0.000001")), priced=True)


def cost_usd(model: str, input_tokens: int, output_tokens: int) -> Decimal:
    """USD for one call; 0 for the offline model and for unpriced models (see `cost`)."""
    return cost(model, input_tokens, output_tokens).usd


def is_priced(model: str) -> bool:
    return price_for(model) is not None
