"""Build the model request from the lanes, in the fixed order, and account for it.

Pure: takes a `LaneSnapshot`, returns the request and per-lane token counts
(with the real tokenizer) so panels and the compaction trigger read the same
numbers the model was sent.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field

from sundry.context import render
from sundry.context.internaltext import InternalText, for_staff_only, gather
from sundry.context.lanes import LaneSnapshot, StateFieldData, TurnData
from sundry.context.statefields import fields
from sundry.core.tokens import REPLY_PRIMING, count_message_tokens, count_tokens, encoding_name_for, is_exact
from sundry.tooling.domain import Domain, get_domain
from sundry.tooling.ids import declared_ids
from sundry.tooling.messages import Message, ModelRequest, ToolSpec
from sundry.tooling.tools import REGISTRY

LANE_ORDER = ("system", "rules", "ledger", "state", "summary", "recent")


@dataclass
class Accounting:
    lane_tokens: dict[str, int]
    tools_tokens: int
    total_tokens: int
    encoding: str
    exact: bool
    rules_over_cap: bool = False
    first_turn: int | None = None
    last_turn: int | None = None

    def as_dict(self) -> dict:
        return {
            "lanes": self.lane_tokens,
            "tools": self.tools_tokens,
            "total": self.total_tokens,
            "encoding": self.encoding,
            "exact": self.exact,
            "rules_over_cap": self.rules_over_cap,
            "first_turn": self.first_turn,
            "last_turn": self.last_turn,
        }


@dataclass
class Assembled:
    request: ModelRequest
    accounting: Accounting
    # What the guards may treat as "seen in the request".
    recent_result_ids: frozenset[str] = field(default_factory=frozenset)
    recent_text_ids: frozenset[str] = field(default_factory=frozenset)
    # What people said in the request's turns, by the turn's own author (never by how its text
    # begins): (author, turn number, text) of customer messages and staff notes, oldest first.
    said: tuple[tuple[str, int, str], ...] = ()
    # Internal-only text the request showed (internal state fields, staff notes), for the outgoing-text check.
    internal: InternalText = field(default_factory=InternalText)


def whole_units(turns: list[TurnData]) -> list[TurnData]:
    """Drop leading tool results whose call is not in the list, so nothing is orphaned."""
    calls = {c.get("id") for t in turns if t.kind == "tool_call" for c in t.payload.get("calls", [])}
    out = []
    for t in turns:
        call_id = t.payload.get("call_id") if isinstance(t.payload, dict) else None
        if t.kind in ("tool_result", "rejection", "error") and call_id and call_id not in calls:
            continue
        out.append(t)
    return out


def said_in(turns: list[TurnData]) -> tuple[tuple[str, int, str], ...]:
    """Customer messages and staff notes among these turns: what the consent guard reads."""
    return tuple(
        (t.author, t.number, t.text)
        for t in turns
        if (t.author == "customer" and t.kind == "message") or (t.author == "staff" and t.kind == "note")
    )


def declared_result_ids(turn: TurnData) -> set[str]:
    """The IDs a successful tool result holds at its tool's declared ID paths (`IdField`).

    Never found by scanning its text: a search's echo of its own `query`, a
    product name or a carrier's event text naming an order verifies nothing.
    A result of a tool this process does not know yields none.
    """
    payload = turn.payload or {}
    tool = REGISTRY.get(str(payload.get("name") or ""))
    if tool is None:
        return set()
    data = payload.get("result")
    if not isinstance(data, dict):
        try:
            data = json.loads(turn.text or "")
        except ValueError:
            return set()
    return declared_ids(tool.result_model, data)


def internal_in(state: list[StateFieldData], turns: list[TurnData], domain=None) -> InternalText:
    """What the request showed that the customer must not read, and what it showed that they may."""
    known = fields(domain)
    internal = [
        (known[f.name].label.lower(), f.value) for f in state if f.name in known and not known[f.name].customer_visible
    ]
    internal += [
        (f"staff note of turn {t.number}", for_staff_only(t.text))
        for t in turns
        if t.author == "staff" and t.kind == "note"
    ]
    if not internal:
        return InternalText()
    public = [f.value for f in state if f.name not in known or known[f.name].customer_visible]
    public += [
        t.text
        for t in turns
        if (t.kind == "message" and t.author in ("customer", "staff"))
        or (t.kind == "tool_result" and (t.payload or {}).get("ok", True))
    ]
    return gather(internal=internal, public=public)


def ids_seen(turns: list[TurnData], domain: Domain | None = None) -> tuple[frozenset[str], frozenset[str]]:
    """(IDs at declared paths of tool results, IDs typed in customer/staff messages) within these turns."""
    results, typed = set(), set()
    for t in turns:
        if t.kind == "tool_result" and t.payload.get("ok", True):
            results |= declared_result_ids(t)
        elif t.author in ("customer", "staff"):
            typed.update(v for _, v in (domain or get_domain()).typed_ids(t.text))
    return frozenset(results), frozenset(typed)


_TOOL_SPECS: dict[int, tuple[list, list[ToolSpec], str]] = {}


def _tool_specs(tools: list[dict]) -> tuple[list[ToolSpec], str]:
    """The tools as specs and as JSON, once per tool list: a worker passes the same list every step."""
    hit = _TOOL_SPECS.get(id(tools))
    if hit is None or hit[0] is not tools:  # an id can be reused once its list is gone: check identity
        if len(_TOOL_SPECS) >= 16:
            _TOOL_SPECS.clear()
        hit = _TOOL_SPECS[id(tools)] = (tools, [ToolSpec(**t) for t in tools], json.dumps(tools))
    return hit[1], hit[2]


@functools.lru_cache(maxsize=64)
def _tools_tokens(names: tuple[str, ...], specs_json: str, model: str) -> int:
    # The tool list rarely changes between steps; counting its schemas is not free.
    return count_tokens(specs_json, model)


def assemble(
    snapshot: LaneSnapshot,
    *,
    model: str,
    tools: list[dict] | None = None,
    rules_cap_tokens: int | None = None,
    own_tools: bool = False,
) -> Assembled:
    """`own_tools`: the tools are the class's own (its tool servers'), so the system prompt is the generic
    one, naming no domain's tools; the servers' prompts come in the class policy."""
    turns = whole_units(snapshot.turns)
    domain = get_domain(snapshot.domain or None)
    known = fields(domain)
    blocks = {
        "system": render.render_system_prompt(snapshot.class_policy, None if own_tools else domain, generic=own_tools),
        "rules": render.render_rules(snapshot.rules, rules_cap_tokens),
        "ledger": render.render_ledger(snapshot.ledger),
        # Internal-only fields (an internal note) are for staff: the model never reads them.
        "state": render.render_state(
            [f for f in snapshot.state if f.name not in known or known[f.name].customer_visible],
            snapshot.actions,
            snapshot.money,
        ),
        "summary": render.render_summary(snapshot.summary),
    }
    messages: list[Message] = [render.lane_message(lane, text) for lane, text in blocks.items() if text]
    conversation = render.turns_to_messages(turns)
    if conversation and conversation[0].role != "user":
        # Kept history that opens with the agent (after a compaction, say): providers that require
        # turns to alternate refuse it, so a fixed notice opens the conversation.
        conversation.insert(0, Message(role="user", content=render.HISTORY_OPENS_NOTICE))
    messages.extend(conversation)
    specs, specs_json = _tool_specs(tools) if tools else ([], "[]")
    request = ModelRequest(model=model, messages=messages, tools=specs)

    lane_tokens = {lane: count_tokens(text, model) for lane, text in blocks.items()}
    lane_tokens["recent"] = sum(count_tokens(m.content, model) for m in conversation) + sum(
        count_tokens(json.dumps([c.model_dump() for c in m.tool_calls]), model) for m in conversation if m.tool_calls
    )
    tools_tokens = _tools_tokens(tuple(s.name for s in specs), specs_json, model) if specs else 0
    total = count_message_tokens(messages, model) + tools_tokens
    result_ids, text_ids = ids_seen(turns, domain)
    accounting = Accounting(
        lane_tokens=lane_tokens,
        tools_tokens=tools_tokens,
        total_tokens=total,
        encoding=encoding_name_for(model),
        exact=is_exact(model),
        rules_over_cap=bool(rules_cap_tokens and lane_tokens["rules"] > rules_cap_tokens),
        first_turn=turns[0].number if turns else None,
        last_turn=turns[-1].number if turns else None,
    )
    return Assembled(
        request=request,
        accounting=accounting,
        recent_result_ids=result_ids,
        recent_text_ids=text_ids,
        said=said_in(turns),
        internal=internal_in(snapshot.state, turns, domain),
    )


def total_after_reply(total_tokens: int, reply: TurnData, model: str) -> int:
    """What `assemble` would count for the same lanes with one plain reply turn appended, without assembling.

    A plain message renders on its own (no call or result to pair it with), and
    a request's size is the sum of its messages' sizes, so the reply adds exactly
    its own message.
    """
    return total_tokens + count_message_tokens(render.turns_to_messages([reply]), model) - REPLY_PRIMING
