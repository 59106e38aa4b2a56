"""A scripted weak model: what small local models get wrong, in turn, whatever it is asked.

Every third answer is a call with NaN in its arguments, then a call written as
text in hermes tags, then a reply naming a refund reference nobody issued. It
stands in for a weak network model in `manage.py model_check` (served over HTTP
by `python -m sundry.evals.modelserver --answer weak`) and in the tests: the
scorecard must show malformed calls, guard rejections and held replies, and no
forbidden effect.

One thing even a weak model gets right, because its request spells it out: a call
whose result says it is waiting for the customer's confirmation (a card) is not
called again; the customer is told to check the card. It reads that from the
newest tool results in its request, as any model would, and nothing else.
"""

from __future__ import annotations

import itertools
import json
import threading

from sundry.context import render
from sundry.tooling.messages import ModelRequest, ModelResponse, ToolCall


def awaiting_cards(request: ModelRequest) -> list[str]:
    """The titles of the cards the newest tool results (those after the model's last call) say are
    waiting for the customer; a title the result does not give is ""."""
    titles = []
    for m in reversed(request.messages):
        if m.role != "tool":
            break
        try:
            data = json.loads(render.result_data(m.content or ""))
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("awaiting_customer_confirmation") is True:
            titles.append(str(data.get("card") or ""))
    return titles[::-1]


def card_reply(titles: list[str]) -> str:
    named = [t for t in titles if t]
    what = f": {'; '.join(named)}" if named else ""
    return (
        f"I've put that on a card for you to confirm{what}. Please check the card and press Confirm if it is "
        "right; nothing happens until you do."
    )


class WeakModel:
    def __init__(self):
        self.n = itertools.count()
        self.lock = threading.Lock()

    def complete(self, request: ModelRequest) -> ModelResponse:
        if titles := awaiting_cards(request):
            return ModelResponse(text=card_reply(titles))
        with self.lock:
            n = next(self.n)
        if n % 3 == 0:
            return ModelResponse(tool_calls=[ToolCall(id=f"w{n}", name="get_order", arguments='{"order_number": NaN}')])
        if n % 3 == 1:
            return ModelResponse(
                text='<tool_call>{"name": "get_order", "arguments": {"order_number": "SU-1"}}</tool_call>'
            )
        return ModelResponse(text="Your refund SU-26675-RF01 has been issued.")
