"""The individual safety checks, each a small pure function over a request or lanes."""

from __future__ import annotations

from dataclasses import dataclass

from sundry.agent.guards import callguards as guards
from sundry.agent.guards.callguards import GuardInput, GuardVerdict, check_call
from sundry.context import render
from sundry.context.lanes import ActionData, LedgerData, RuleData
from sundry.tooling.messages import ModelRequest, ModelResponse

ID_GUARDS = ("id", "unverified_id", "mutation")


def id_accepted(
    value: str, *, lookup: bool, ledger: list[LedgerData], recent: frozenset[str], typed: frozenset[str]
) -> bool:
    """The ID guard's own rule for one value (`agent.guards.id_usable`, which `check_call` applies
    to every ID of a call): one implementation, so the harness's ID figures move with the guard."""
    return guards.id_usable(value, lookup=lookup, ledger=ledger, recent=recent, typed=typed)


def guard_verdict(
    domain,
    tool: str,
    arguments,
    *,
    ledger: list[LedgerData],
    recent: frozenset[str],
    typed: frozenset[str],
    rules: list[RuleData] = (),
    actions: list[ActionData] = (),
) -> GuardVerdict | None:
    """What the runtime guard says about a call, on the domain's tool vocabulary (None: unknown tool)."""
    gtool = domain.guard_tool(tool)
    if gtool is None:
        return None
    return check_call(
        GuardInput(
            tool=gtool,
            arguments=domain.guard_arguments(tool, arguments),
            ledger=list(ledger),
            recent_ids=recent,
            recent_text_ids=typed,
            rules=list(rules),
            actions=list(actions),
            lookup_tools=domain.lookup_tools,
            domain=getattr(domain, "domain", None),
        )
    )


def orphans(request: ModelRequest) -> list[str]:
    """Tool calls without their result, or results without their call, in a request."""
    problems = []
    msgs = request.messages
    for i, m in enumerate(msgs):
        if m.role == "assistant" and m.tool_calls:
            following = []
            for n in msgs[i + 1 :]:
                if n.role != "tool":
                    break
                following.append(n)
            answered = {n.tool_call_id: n for n in following}
            for c in m.tool_calls:
                r = answered.get(c.id)
                if r is None:
                    problems.append(f"call {c.name} ({c.id}) has no result")
                elif r.content == render.MISSING_RESULT:
                    problems.append(f"call {c.name} ({c.id}) was separated from its result")
        if m.role == "tool":
            j = i - 1
            while j >= 0 and msgs[j].role == "tool":
                j -= 1
            if j < 0 or not any(c.id == m.tool_call_id for c in msgs[j].tool_calls):
                problems.append(f"result {m.tool_call_id} has no call before it")
    return problems


def block(request: ModelRequest, lane: str) -> str:
    return next((m.content for m in request.messages if render.lane_of(m) == lane), "")


def action_line(tool: str, target: str) -> str:
    """How the state lane names an action taken (render._action_line)."""
    return f"{tool} on {target}" if target else tool


@dataclass(frozen=True)
class NextCall:
    tool: str | None
    ids: tuple[tuple[str, str], ...]  # sorted (kind, value)
    arguments: dict | str | None = None

    def describe(self) -> str:
        if self.tool is None:
            return "reply (no tool call)"
        return f"{self.tool}(" + ", ".join(f"{k}={v}" for k, v in self.ids) + ")"


def next_call(domain, response: ModelResponse) -> NextCall:
    if not response.tool_calls:
        return NextCall(None, ())
    c = response.tool_calls[0]
    ids = tuple(sorted((kind, value) for _, kind, value in domain.id_args(c.name, c.arguments)))
    return NextCall(c.name, ids, c.arguments)


def ids_differ(a: NextCall, b: NextCall) -> bool:
    """Any difference in identifier arguments fails, even when the call would succeed."""
    return a.ids != b.ids


def classify_diff(domain, ref: NextCall, got: NextCall, *, guard_accepts: bool) -> str:
    """How a compacted next call differs from the uncompacted one. Every kind is a failure;
    the kind says how bad: an unsafe call acts on something else, the rest cost a turn."""
    if got.tool is None:
        return "asks_again"  # replied (or asked) where the full request led to a call
    if not guard_accepts:
        return "rejected_by_guard"  # an ID the guard would refuse: caught before it runs
    if got.tool in domain.lookup_tools:
        return "relookup"  # fetches again what compaction dropped, with IDs it holds
    return "unsafe_different_action"
