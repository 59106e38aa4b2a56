"""A ticket class's tools as one value: resolved once per run and passed down.

A class without tool servers works with its domain's in-process tools; a class
with servers works with Sundry's own lane tools and the tools its servers list,
read by their declaration files (`toolservers.catalog`). Which of the two a
class is gets decided here, once: the run, its steps, calls, guards, assembly,
effects and reply check ask the `Toolbox` — the tools by name, what the model
is offered, what each tool is, the servers' prompts, the lookups, the holds for
undeclared writes, which tools run outside the database transaction — and never
ask again.

`toolbox_for(ticket_class)` builds it; the run builds one per claim (`loop`),
and callers outside a run (a staff decision, compaction, the customer's page)
build their own the same way. `listing=False` reads the declaration files
alone, contacting no server: what a message does at once (the IDs it types,
the rules it states) and what the desk shows of a result need no listing.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from django.db.models import Exists, OuterRef

import sundry.agent.tools  # noqa: F401  (registers Sundry's own tools; the domains' register at startup)
from sundry.context import tools as _lane_tools  # noqa: F401  (registers pin_constraint, label_entity)
from sundry.context.assembly import Assembled
from sundry.tooling.domain import Domain, domain_for, get_domain, tools_for
from sundry.tooling.tools import REGISTRY, Tool
from sundry.toolservers import catalog
from sundry.toolservers.catalog import ClassTools
from sundry.toolservers.models import ToolServer

_EMPTY: Mapping = MappingProxyType({})


@dataclass(frozen=True)
class Toolbox:
    # What a call may name (the class's deny list is applied where the call is made, so a denied
    # tool is refused by name rather than reported unknown).
    tools: Mapping[str, Tool]
    # What the model is offered, the deny list applied: one list per toolbox, so assembly
    # renders and counts it once.
    specs: list[dict]
    # What each tool is (guards, effects, the reply check): the servers' declarations, else the
    # class's domain.
    domain: Domain
    # The class's own domain: an in-process tool harvests by it.
    class_domain: Domain
    # The tools the class declares: its declaration files' (one no server lists included), else its
    # domain's. What a rule stated in a message is mapped onto, and what the desk reads a result by.
    declared: Domain
    approval_rules: Any = None  # as the guards read them: the class's, plus the holds for undeclared writes
    lookup_tools: frozenset[str] | None = None  # None: the domain's lookups
    outside: frozenset[str] = frozenset()  # tools called outside any transaction (a tool server's)
    denied: frozenset[str] = frozenset()
    prompts: tuple[str, ...] = ()  # the servers' declaration prompts, before the class's policy
    own_tools: bool = False  # the tools are the class's own (its servers'): the generic system prompt
    servers: tuple[ToolServer, ...] = ()  # the class's enabled servers, as read when this was built
    listed: bool = True  # False: read from the declaration files alone (`tools` holds only lane tools)
    served: ClassTools | None = field(default=None, repr=False)

    def tool(self, name: str) -> Tool | None:
        """The tool a call names; None when the class has none of that name."""
        if not self.listed:
            raise LookupError("this toolbox read no server's listing: build it with listing=True")
        return self.tools.get(name)

    def runs_outside(self, name: str) -> bool:
        """The tool is called outside any database transaction (a tool server's)."""
        return name in self.outside

    def offered(self) -> list[str]:
        """The names a refused call may be told of: the class's tools less its deny list."""
        return sorted(n for n in self.tools if n not in self.denied)

    def with_prompts(self, snapshot):
        """The lanes with the servers' prompts (how to work their tools) before the class's policy."""
        if not self.prompts:
            return snapshot
        return dataclasses.replace(
            snapshot, class_policy="\n\n".join([*self.prompts, snapshot.class_policy or ""]).strip()
        )

    def typed_ids(self, text: str) -> list[tuple[str, str]]:
        """(value, kind) of IDs a person typed: in the class domain's formats, then in those its
        declaration files give."""
        out = [(value, kind) for kind, value in self.class_domain.typed_ids(text)]
        if self.served is not None:
            out += [(value, kind) for kind, value in self.served.typed_ids(text)]
        return out

    def request_ids(self, assembled: Assembled) -> tuple[frozenset[str], frozenset[str]]:
        """For a class with servers: the IDs its tools' results in this request hold (read by the
        declaration files), and the IDs the customer typed in its files' formats. Empty otherwise:
        assembly found the in-process tools' own."""
        served = self.served
        if served is None:
            return frozenset(), frozenset()
        results = set()
        for m in assembled.request.messages:
            if m.role == "tool" and m.tool_name in served.remote and not m.content.startswith("ERROR"):
                try:
                    data = json.loads(m.content)
                except ValueError:
                    data = m.content
                results.update(v for _k, v in served.result_ids(m.tool_name, data))
        typed = {v for _author, _turn, text in assembled.said for _k, v in served.typed_ids(text)}
        return frozenset(results), frozenset(typed)


def _servers(ticket_class) -> list[ToolServer]:
    return list(ToolServer.objects.filter(ticket_class_id=ticket_class.pk, enabled=True).order_by("pk"))


# The attribute a ticket read with `with_servers_flag` carries: whether its class has enabled tool servers.
HAS_SERVERS = "class_has_servers"


def with_servers_flag(tickets):
    """`tickets` (a queryset) with whether each one's class has enabled tool servers, read in the
    same statement: a class without any then costs no read of them (`servers_if_flagged`)."""
    return tickets.annotate(
        **{HAS_SERVERS: Exists(ToolServer.objects.filter(ticket_class_id=OuterRef("ticket_class_id"), enabled=True))}
    )


def servers_if_flagged(ticket) -> list | None:
    """`toolbox_for`'s `servers` for a ticket: none, when it was read with `with_servers_flag` and its
    class has none; else None (read them)."""
    return [] if getattr(ticket, HAS_SERVERS, None) is False else None


_SPECS: dict[str, tuple[int, Domain, list[dict]]] = {}


def domain_specs(domain: Domain | None = None) -> list[dict]:
    """The JSON schemas of the tools a ticket in `domain` (default: the default domain) may call,
    built once per domain: the registry only grows at import."""
    domain = domain or get_domain()
    hit = _SPECS.get(domain.name)
    if hit is None or hit[0] != len(REGISTRY) or hit[1] is not domain:
        hit = _SPECS[domain.name] = (len(REGISTRY), domain, [tool.spec(domain) for tool in tools_for(domain)])
    return hit[2]


def toolbox_for(ticket_class, *, servers: list[ToolServer] | None = None, listing: bool = True) -> Toolbox:
    """The class's toolbox. `servers`: its enabled tool servers when the caller read them already
    (the run's load says whether there are any); `listing=False`: from the declaration files
    alone, no server contacted."""
    servers = _servers(ticket_class) if servers is None else list(servers)
    own = domain_for(ticket_class)
    denied = ticket_class.denied
    if not servers:
        specs = domain_specs(own)
        return Toolbox(
            tools=MappingProxyType({t.name: t for t in tools_for(own)}),
            specs=[t for t in specs if t["name"] not in denied] if denied else specs,
            domain=own,
            class_domain=own,
            declared=own,
            approval_rules=ticket_class.approval_rules or {},
            denied=denied,
        )
    served = catalog.class_tools(ticket_class, servers=servers) if listing else catalog.declared_only(servers)
    holds = served.approval_holds({s.pk: s.hold_undeclared_writes for s in servers})
    specs = served.spec_list
    return Toolbox(
        tools=MappingProxyType(served.tools),
        specs=[t for t in specs if t["name"] not in denied] if denied else specs,
        domain=served.domain,
        class_domain=own,
        declared=served.declared,
        approval_rules={**holds, **(ticket_class.approval_rules or {})},
        lookup_tools=served.lookup_tools,
        outside=frozenset(served.remote),
        denied=denied,
        prompts=tuple(p for d in served.declarations if (p := d.prompt.strip())),
        own_tools=True,
        servers=tuple(servers),
        listed=listing,
        served=served,
    )


__all__ = ["Toolbox", "domain_specs", "servers_if_flagged", "toolbox_for", "with_servers_flag"]
