"""A scripted stand-in for a network model, for tests across the project.

It answers with the responses it was given, in order, and records every
request it was sent, so a test can assert on exactly what the model saw.
Inject it with `Gateway(override=ScriptedModel([...]))`.
"""

from __future__ import annotations

from typing import Callable, Sequence, Union

from sundry.tooling.messages import ModelRequest, ModelResponse

# A step of the script: a fixed response, a function of the request (to echo an
# id the request carries), or an exception to raise (e.g. a ModelCallError).
Step = Union[ModelResponse, Callable[[ModelRequest], ModelResponse], BaseException]


class ScriptExhausted(AssertionError):
    """The code under test asked the model more often than the script expected."""


class ScriptedModel:
    def __init__(self, steps: Sequence[Step] = (), *, name: str = "scripted"):
        self.steps = list(steps)
        self.name = name
        self.requests: list[ModelRequest] = []

    def complete(self, request: ModelRequest) -> ModelResponse:
        # A deep copy, so a caller that mutates its request afterwards cannot
        # rewrite what the model was shown.
        self.requests.append(request.model_copy(deep=True))
        n = len(self.requests)
        if n > len(self.steps):
            raise ScriptExhausted(f"scripted model got request #{n} but was given {len(self.steps)} responses")
        step = self.steps[n - 1]
        if isinstance(step, BaseException):
            raise step
        response = step(request) if callable(step) else step
        if not isinstance(response, ModelResponse):
            raise TypeError(f"script step #{n} returned {type(response).__name__}, not ModelResponse")
        # Copy so the same response object can be scripted twice safely.
        return response.model_copy(deep=True, update={"model": response.model or self.name})

    @property
    def remaining(self) -> int:
        return len(self.steps) - len(self.requests)
