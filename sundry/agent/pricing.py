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


def cost(model: str, input_tokens: int, output_tokens: int, *, base_url: str | None = None) -> Cost:
    """USD for one call of `model` ("<provider>:<name>" or "offline").

    `base_url` is where an openai-compatible or ollama model was served from; it
    decides which provider's prices apply, if any.
    """
    if model == OFFLINE:
        return Cost(Decimal(0), priced=True)
    provider, sep, name = model.partition(":")
    if not sep:
        provider, name = "", model
    usage = genai_prices.Usage(input_tokens=input_tokens, output_tokens=output_tokens)
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

