"""Which of a server's tools its class offers the model, and tool names two servers would share.

A server's *allowed tools* (empty: all it lists) and *denied tools* narrow what the
class offers: a tool left out is never in the model's tool list, and a call naming
it is refused as a tool the class does not have. A tool name may come from one
server of a class only; the admin refuses a save that would give two servers the
same name (the model could not say which it meant), naming both servers.
"""

from __future__ import annotations

from sundry.tooling.tools import name_list
from sundry.toolservers import declfile, limits

names = name_list  # the allow and deny fields' format, shared with the ticket class's deny list


def offers(server, name: str) -> bool:
    allowed = names(server.allowed_tools)
    return (not allowed or name in allowed) and name not in names(server.denied_tools)


def known(server) -> set[str]:
    """The tool names `server` would bring to its class, as far as Sundry knows without contacting it:
    its last listing and its declaration file's tools, narrowed by its allow and deny lists."""
    found = {t.get("name", "") for t in server.listed_tools or [] if isinstance(t, dict)}
    if server.declaration_path:
        try:
            found |= set(declfile.load(limits.declaration_file(server.declaration_path)).tools)
        except declfile.DeclarationError:
            pass  # the file's own field says what is wrong with it
    return {n for n in found if n and offers(server, n)}


def clashes(server, others) -> dict[str, list[str]]:
    """Other enabled servers of the class → the tool names they share with `server`."""
    if not server.enabled:
        return {}
    mine = known(server)
    out = {}
    for other in others:
        if other.pk == server.pk or not other.enabled:
            continue
        shared = sorted(mine & known(other))
        if shared:
            out[other.name] = shared
    return out


def clash_message(server, found: dict[str, list[str]]) -> str:
    parts = "; ".join(
        f"'{server.name}' and '{other}' both offer {', '.join(shared)}" for other, shared in found.items()
    )
    return (
        f"Tool names clash in this class: {parts}. A tool name may come from one server only — list it "
        "under Denied tools on one of the two servers, or give the other's tools other names."
    )
