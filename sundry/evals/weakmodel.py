"""A scripted weak model: what small local models get wrong, in turn, whatever it is asked.

Every third answer is a call with NaN in its arguments, then a call written as
text in hermes tags, then a reply naming a refund reference nobody issued. It
stands in for a weak network model in `manage.py model_check` (served over HTTP
by `python -m sundry.evals.modelserver --answer weak`) and in the tests: the
scorecard must show malformed calls, guard rejections and held replies, and no
forbidden effect.
"""

from __future__ import annotations

import itertools
import threading

from sundry.tooling.messages import ModelRequest, ModelResponse, ToolCall


class WeakModel:
    def __init__(self):
        self.n = itertools.count()
        self.lock = threading.Lock()

    def complete(self, request: ModelRequest) -> ModelResponse:
        with self.lock:
            n = next(self.n)
        if n % 3 == 0:
            return ModelResponse(tool_calls=[ToolCall(id=f"w{n}", name="get_order", arguments='{"order_number": NaN}')])
        if n % 3 == 1:
            return ModelResponse(text='<tool_call>{"name": "get_order", "arguments": {"order_number": "SU-1"}}</tool_call>')
        return ModelResponse(text="Your refund SU-26675-RF01 has been issued.")
