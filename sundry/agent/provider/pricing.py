"""What a model call cost, from genai-prices' bundled price data.

genai-prices ships list prices for the hosted providers and matches dated
snapshots ("gpt-4.1-mini-2025-04-14") to their family. We use only its bundled
snapshot: nothing is fetched at run time. A model it does not price costs 0 and
is reported as unpriced (`Cost.priced` is False, the admin figures list it), so
a missing price never passes as "free". The offline model really is free.
Self-hosted servers (openai-compatible, ollama) are priced only when their base
URL is a provider genai-prices knows; otherwise nobody bills per token and they
are unpriced.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from decimal import Decimal

import genai_prices

log = logging.getLogger(__name__)

OFFLINE = "offline"
# Our provider prefix -> genai-prices' provider id; providers not listed are looked up by URL.
_PROVIDER_IDS = {"openai": "openai", "anthropic": "anthropic"}
_warned: set[str] = set()


@dataclass(frozen=True)
class Cost:
    usd: Decimal
    # False when the model has no known price and `usd` is a placeholder 0.
    priced: bool


def cost(
    model: str,
    input_tokens: int,
    output_tokens: int,
    *,
    base_url: str | None = None,
    cached_input_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> Cost:
    """USD for one call of `model` ("<provider>:<name>" or "offline").

    `base_url` is where an openai-compatible or ollama model was served from; it
    decides which provider's prices apply, if any. `input_tokens` counts every input
    token; of them, `cached_input_tokens` were read from the provider's prompt cache and
    `cache_write_tokens` written to it, each at the model's own cache price.
    """
    if model == OFFLINE:
        return Cost(Decimal(0), priced=True)
    provider, sep, name = model.partition(":")
    if not sep:
        provider, name = "", model
    usage = genai_prices.Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=cached_input_tokens or None,
        cache_write_tokens=cache_write_tokens or None,
    )
    try:
        if provider in _PROVIDER_IDS:
            price = genai_prices.calc_price(usage, name, provider_id=_PROVIDER_IDS[provider])
        elif base_url:
            price = genai_prices.calc_price(usage, name, provider_api_url=base_url)
        else:
            raise LookupError(f"no provider for {model!r}")
    except LookupError:
        if model not in _warned:
            _warned.add(model)  # once per model, not once per step
            log.warning("model %s has no known price; its calls are recorded at 0 USD and listed as unpriced", model)
        return Cost(Decimal(0), priced=False)
    # AgentStep.cost_usd keeps six decimal places.
    return Cost(price.total_price.quantize(Decimal("0.000001")), priced=True)


def cache_saving(
    model: str,
    input_tokens: int,
    output_tokens: int,
    *,
    cached_input_tokens: int,
    cache_write_tokens: int = 0,
    base_url: str | None = None,
) -> Decimal | None:
    """What the prompt cache saved on these calls: their cost had every input token been read afresh,
    less their cost as billed (cache reads cheaper, cache writes dearer where the provider says so).
    None when the model has no known price."""
    without = cost(model, input_tokens, output_tokens, base_url=base_url)
    billed = cost(
        model,
        input_tokens,
        output_tokens,
        base_url=base_url,
        cached_input_tokens=cached_input_tokens,
        cache_write_tokens=cache_write_tokens,
    )
    if not (without.priced and billed.priced):
        return None
    return without.usd - billed.usd
