"""What a budget costs in the lab: per ticket and per month at the class's volume, prompt cache included.

- Each replayed step is priced on its own (genai-prices, through `agent.provider.pricing`), so a
  model whose price changes above some request size is charged per request, as the provider bills.
- The prompt cache: of each step's input, the shares the class's recorded requests read from the
  provider's cache and wrote to it (`AgentStep.cached_input_tokens`, `cache_write_tokens`), each at
  the model's own cache price. A class with no recorded provider usage has shares of 0.
- The summariser: each compaction the replay makes is one call whose input is the summariser's
  template, the turns it replaces and the summary before it, and whose output is a summary.
  Summariser requests differ each time, so no cache share is applied to them.
- Volume: the class's tickets in the last 30 days; a class younger than that is counted at the
  rate its replayed tickets arrived.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from functools import lru_cache

from django.db.models import Count, Sum
from django.utils import timezone

from sundry.agent.models import AgentStep
from sundry.agent.provider import pricing
from sundry.agent.provider.gateway import resolve_model, validate_model_name
from sundry.compaction import summariser as sm
from sundry.core.tokens import count_tokens
from sundry.tickets.models import Ticket, TicketClass

VOLUME_DAYS = 30
CENT = Decimal("0.000001")


@dataclass(frozen=True)
class CacheShares:
    read: float  # of every input token, the share read from the provider's prompt cache
    write: float  # … and written to it
    steps: int  # the recorded requests the shares come from (0: none reported usage)

    def split(self, input_tokens: int) -> tuple[int, int]:
        """(cache read, cache write) tokens of a request of `input_tokens`, at these shares."""
        read = round(input_tokens * self.read)
        return read, min(round(input_tokens * self.write), input_tokens - read)


NO_CACHE = CacheShares(0.0, 0.0, 0)


def cache_shares(tclass: TicketClass) -> CacheShares:
    """The class's recorded cache shares: over its steps a provider answered and reported usage for."""
    got = AgentStep.objects.filter(ticket__ticket_class=tclass, offline=False, input_tokens__gt=0).aggregate(
        n=Count("id"), tin=Sum("input_tokens"), read=Sum("cached_input_tokens"), write=Sum("cache_write_tokens")
    )
    if not got["n"]:
        return NO_CACHE
    return CacheShares(
        read=round((got["read"] or 0) / got["tin"], 4), write=round((got["write"] or 0) / got["tin"], 4), steps=got["n"]
    )


def _base_url(model: str) -> str | None:
    return None if model == pricing.OFFLINE else resolve_model(model).base_url


def price_steps(model: str, steps: list[tuple[int, int]], shares: CacheShares = NO_CACHE) -> Decimal | None:
    """USD for these (input, output) requests at `model`'s prices, each priced alone with the cache
    shares applied; None when genai-prices has no price for the model."""
    url = _base_url(model)
    total = Decimal(0)
    for input_tokens, output_tokens in steps:
        read, write = shares.split(input_tokens)
        cost = pricing.cost(
            model, input_tokens, output_tokens, base_url=url, cached_input_tokens=read, cache_write_tokens=write
        )
        if not cost.priced:
            return None
        total += cost.usd
    return total


def price_problem(model: str) -> str:
    """Why the lab cannot price `model`, or "" when it can (a proposal's models must be priced)."""
    try:
        validate_model_name(model)
    except ValueError as exc:
        return str(exc)
    if not pricing.cost(model, 1000, 100, base_url=_base_url(model)).priced:
        return f"genai-prices has no price for {model!r}, so the lab cannot say what it costs: name a priced model."
    return ""


@lru_cache(maxsize=16)
def template_tokens(model: str) -> int:
    """The summariser's fixed instructions and section headings, counted for `model`."""
    headings = "\n".join(
        (sm.LEDGER_SECTION, sm.RULES_SECTION, sm.PREVIOUS_SECTION, sm.TURNS_SECTION, sm.QUOTES_SECTION)
    )
    return count_tokens(sm.TEMPLATE + "\n" + headings, model)


@dataclass(frozen=True)
class SummariserCost:
    model: str  # priced as
    calls: int
    input_tokens: int
    output_tokens: int
    cost: Decimal | None

    def as_json(self) -> dict:
        return {**asdict(self), "cost": None if self.cost is None else str(self.cost)}


def summariser_cost(model: str, replaced: list[int], summary_tokens: int) -> SummariserCost:
    """One call per compaction: `replaced` holds each call's replaced tokens (turns and the summary before)."""
    fixed = template_tokens(model)
    calls = [(fixed + n, summary_tokens) for n in replaced]
    return SummariserCost(
        model=model,
        calls=len(calls),
        input_tokens=sum(i for i, _ in calls),
        output_tokens=sum(o for _, o in calls),
        cost=price_steps(model, calls),
    )


@dataclass(frozen=True)
class Volume:
    per_month: float  # tickets a month
    basis: str  # how it was counted, in words

    def as_json(self) -> dict:
        return asdict(self)


def monthly_volume(tclass: TicketClass, window: list[datetime], *, now: datetime | None = None) -> Volume:
    """The class's tickets a month: those of the last 30 days; for a younger class, the replayed
    window's tickets (`window`: when each was opened) at the rate they came in."""
    now = now or timezone.now()
    since = now - timedelta(days=VOLUME_DAYS)
    if tclass.created_at and tclass.created_at <= since:
        n = Ticket.objects.filter(ticket_class=tclass, created_at__gte=since).count()
        return Volume(float(n), f"{n} ticket{'s' if n != 1 else ''} in the last {VOLUME_DAYS} days")
    if not window:
        return Volume(0.0, "no tickets yet")
    days = max(1.0, (now - min(window)).total_seconds() / 86400)
    rate = round(len(window) / days * VOLUME_DAYS, 1)
    return Volume(
        rate,
        f"the class is younger than {VOLUME_DAYS} days: its {len(window)} replayed ticket"
        f"{'s' if len(window) != 1 else ''} over {days:.1f} day{'s' if days != 1 else ''}, at that rate",
    )


def per_ticket_and_month(costs: list[Decimal | None], tickets: int, volume: Volume) -> tuple[str | None, str | None]:
    """(cost per ticket, cost per month) as strings; None when any part has no known price."""
    if not tickets or any(c is None for c in costs):
        return None, None
    per_ticket = sum(costs, Decimal(0)) / tickets
    return str(per_ticket.quantize(CENT)), str((per_ticket * Decimal(str(volume.per_month))).quantize(CENT))
