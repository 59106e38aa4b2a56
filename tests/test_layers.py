"""Dependencies point one way: a module imports only from its own layer or the layers below.

Read from the source (ast), so a new import that climbs a layer, or an import
tucked inside a function to get round a cycle, fails here before it becomes a
habit.
"""

from __future__ import annotations

import ast
from pathlib import Path

import sundry

ROOT = Path(sundry.__file__).parent

# Lowest first: each layer is a folder (a package and everything under it, unless a longer
# prefix names a sub-package of its own). A module belongs to the longest prefix that names it.
LAYERS = [
    ("domain-free", ["sundry.core"]),
    ("model messages and the tool interface", ["sundry.tooling"]),
    # The desk's own customer records: who a ticket belongs to, linked to a domain's customer by reference.
    ("the desk's customers", ["sundry.people"]),
    ("the shop", ["sundry.shop"]),
    # Ticket classes, tickets, turns; the version rule and lock order; the push to watchers;
    # appending a turn; the attention flag; ratings.
    ("the ticket record", ["sundry.tickets"]),
    ("lanes", ["sundry.context"]),
    ("tool servers", ["sundry.toolservers"]),
    # Files on a message: checked, re-encoded, stored and attached to its turn; the agent's posts use it.
    ("attachments", ["sundry.attachments"]),
    # The model path: the gateway to providers, their wire shapes, prices, calls written as text.
    ("the agent's model path", ["sundry.agent.provider"]),
    # What a call or a reply must pass: call guards, consent, approvals, spending, confirmation
    # cards, the reply check and what a reply claims, limits.
    ("the agent's guards", ["sundry.agent.guards"]),
    # The run: its lease, steps, calls, effects, holds and open cards, the Celery tasks.
    ("the agent's run", ["sundry.agent"]),
    # The demo shop's offline agent reads requests with the lanes' and the agent's helpers; nothing
    # imports it (a domain names it by a dotted path, `Domain.offline_model`).
    ("the demo shop's offline agent", ["sundry.shop.offline"]),
    ("compaction", ["sundry.compaction"]),
    # The websocket transport and the panel kit: which audiences exist is registered from above.
    ("live transport", ["sundry.live"]),
    ("the desk", ["sundry.desk"]),
    ("the customer page", ["sundry.portal"]),
    # The demo shop's demo data: ticket classes, logins and tickets worked by the agent (`seed_demo`),
    # and the sign-in page's list of demo logins (a template tag: templates load it by name).
    ("the demo shop's demo data", ["sundry.shop.demo", "sundry.shop.management", "sundry.shop.templatetags"]),
    ("the harness", ["sundry.evals"]),
    ("the project", ["sundry"]),
]

# Function-local imports of sundry modules that are there on purpose.
LOCAL_IMPORTS_ALLOWED = {
    # The task module imports the services to run them; the service queues the task.
    ("sundry.compaction.services", "sundry.compaction.tasks"),
    # The web process's entry point loads Django (through the ASGI app) only when it starts
    # serving, after parsing its options, and tunes the collector after that load.
    ("sundry.web", "sundry.asgi"),
    # The gateway imports the provider SDKs on a model's first call, not when Django starts;
    # the OpenAI client it builds is one of them, and so are the pydantic-ai models it subclasses.
    ("sundry.agent.provider.gateway", "sundry.agent.provider.plainbody"),
    ("sundry.agent.provider.gateway", "sundry.agent.provider.toolschemas"),
}
# Imports that climb on purpose (none at present: add one here with its reason).
UPWARD_ALLOWED: set[tuple[str, str]] = set()
# Django's documented place to import what needs the app registry (signal receivers, listeners).
READY_HOOKS = "ready"
# The harness and benchmarks replay recorded traces without a database and make throwaway
# databases for the rest; they import ORM modules where they use them.
LOCAL_IMPORTS_EXEMPT_PACKAGES = ("sundry.evals",)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py") if "migrations" not in p.parts}


MODULES = _modules()


def layer_of(module: str) -> int:
    best, index = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, index = len(prefix), i
    assert index is not None, f"{module} is in no layer"
    return index


def _imports(module: str, path: Path):
    """(imported sundry module, line, inside a function?, the function's name) for each import."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def targets(node):
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        base = node.module or ""
        if node.level:
            parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            base = f"{parent}.{base}" if base else parent
        # `from sundry.x import y` names module sundry.x.y when there is one.
        return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]

    def walk(node, function):
        for child in ast.iter_child_nodes(node):
            inside = function
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inside = function or child.name
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for target in targets(child):
                    if target == "sundry" or target.startswith("sundry."):
                        yield target, child.lineno, function
            yield from walk(child, inside)

    yield from walk(tree, None)


def test_every_module_has_a_layer():
    for module in MODULES:
        layer_of(module)


def test_no_module_imports_from_a_layer_above_its_own():
    upward = []
    for module, path in sorted(MODULES.items()):
        own = layer_of(module)
        for target, line, _ in _imports(module, path):
            if layer_of(target) > own and (module, target) not in UPWARD_ALLOWED:
                upward.append(f"{module}:{line} imports {target} ({LAYERS[own][0]} → {LAYERS[layer_of(target)][0]})")
    assert upward == []


def test_no_function_local_imports_of_sundry_modules():
    local = []
    for module, path in sorted(MODULES.items()):
        if module.startswith(LOCAL_IMPORTS_EXEMPT_PACKAGES):
            continue
        for target, line, function in _imports(module, path):
            if function is None or (module, target) in LOCAL_IMPORTS_ALLOWED:
                continue
            if module.endswith(".apps") and function == READY_HOOKS:
                continue
            local.append(f"{module}:{line} imports {target} inside {function}()")
    assert local == []


def test_the_checks_see_what_they_look_for(tmp_path):
    # The reader finds both kinds of import it is meant to refuse.
    probe = tmp_path / "probe.py"
    probe.write_text("from sundry.live import panels\n\ndef f():\n    from sundry.shop.models import Order\n")
    found = list(_imports("sundry.core.probe", probe))
    assert ("sundry.live.panels", 1, None) in found
    assert ("sundry.shop.models", 4, "f") in found
    assert layer_of("sundry.live.panels") > layer_of("sundry.core.probe")
    assert layer_of("sundry.tickets.versions") < layer_of("sundry.context.services") < layer_of("sundry.desk.views")


def test_the_benchmarks_are_a_development_package_the_product_does_not_ship():
    """`bench/` sits beside `sundry/`; pyproject's package list (what `pip install .` ships) leaves it out."""
    import tomllib

    from setuptools import find_packages

    include = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"][
        "include"
    ]
    shipped = find_packages(where=ROOT.parent, include=include)
    assert "sundry.evals" in shipped and (ROOT.parent / "bench" / "__init__.py").exists()
    assert not [p for p in shipped if p == "bench" or p.startswith("bench.")], shipped
    assert not [m for m in MODULES if m.startswith("sundry.") and "bench" in m.rsplit(".", 1)[-1]]


def test_folders_are_the_layers():
    """Each layer is a folder, and no two folders import each other, however indirectly: the
    package graph has no cycle (bench/rooms.py counts it for docs/architecture.md)."""
    from bench import rooms

    folders = {p for p in MODULES if (ROOT.parent / p.replace(".", "/") / "__init__.py").exists()}
    assert [p for _, prefixes in LAYERS for p in prefixes if p not in folders] == []
    names, edges = rooms.arrows(ROOT)
    assert rooms.knots(names, edges) == []


def test_the_room_count_finds_a_knot_and_its_fewest_arrows_back_up():
    from bench import rooms

    edges = {("a", "b"): 1, ("b", "c"): 1, ("c", "a"): 1, ("a", "c"): 1, ("d", "a"): 1}
    (knot,) = rooms.knots(["a", "b", "c", "d"], edges)
    assert knot == ["a", "b", "c"] and rooms.fewest_back_up(knot, edges) == 1
