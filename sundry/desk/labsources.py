"""What a budget lab run replays: the class's recent tickets (the window), a file of recorded
conversations (imported traces), or the outcome scenarios.

The window is the desk's own replay (`budgetlab`). Traces and scenarios are the harness's
(`sundry.evals.labtraces`, `sundry.evals.scenarios.lab`): they run in the worker only. The form
still refuses a file it cannot read before anything is kept, so it asks the harness's importers
through `read_traces`, a slot the harness fills when its app is ready — the desk never imports
the layer above it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from sundry.tickets.models import BudgetProposal

WINDOW = BudgetProposal.Source.WINDOW
TRACES = BudgetProposal.Source.TRACES
SCENARIOS = BudgetProposal.Source.SCENARIOS

SCENARIO_SETS = [("fast", "the fast slice (about a dozen)"), ("all", "all of them (several minutes)")]


class TracesUnreadable(ValueError):
    """A traces file the importers cannot read, or one with no conversation in it; the message says why."""


@dataclass(frozen=True)
class TracesRead:
    tickets: int
    domains: list[str]


# Filled by the harness's apps (`sundry.evals.apps`, `sundry.evals.scenarios.apps`): `read_traces` reads a file as the harness imports
# it, raising `TracesUnreadable` with the reason; `scenarios_problem` says why a class cannot run the
# outcome scenarios (another domain, no seeded shop), or None. Unset until then.
_readers: dict[str, Callable] = {}


def register_traces(reader: Callable[[Path], TracesRead]) -> None:
    _readers["traces"] = reader


def register_scenarios(check: Callable[[object], str | None]) -> None:
    _readers["scenarios"] = check


def read_traces(path: Path) -> TracesRead:
    if "traces" not in _readers:
        raise TracesUnreadable("Imported traces need the harness (the sundry.evals app), which is not installed.")
    return _readers["traces"](path)


def scenarios_problem(tclass) -> str | None:
    if "scenarios" not in _readers:
        return "The outcome scenarios need the harness (the sundry.evals app), which is not installed."
    return _readers["scenarios"](tclass)


def trace_roots() -> list[Path]:
    """The folders whose files an admin may name on the page (uploads are read wherever they come from)."""
    return [Path(p).resolve() for p in settings.LAB_TRACE_DIRS if Path(p).is_dir()]


def server_trace_files(limit: int = 200) -> list[str]:
    """Trace files under the allowed folders, for the page's suggestions."""
    out: list[str] = []
    for root in trace_roots():
        for pattern in ("*.json", "*.jsonl"):
            out += [str(p) for p in sorted(root.rglob(pattern))[:limit]]
    return sorted(out)[:limit]


def allowed_path(name: str, *, anywhere: bool = False) -> Path:
    """The server-side file `name` names, refused with the reason when it is missing or (on the page)
    outside the allowed folders. `anywhere`: the command's operator may name any file they can read."""
    path = Path(name).expanduser()
    try:
        resolved = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise TracesUnreadable(f"No file {name} on the server.") from None
    if not resolved.is_file():
        raise TracesUnreadable(f"{name} is not a file.")
    if not anywhere and not any(resolved.is_relative_to(root) for root in trace_roots()):
        roots = ", ".join(map(str, trace_roots())) or "none configured (SUNDRY_LAB_TRACE_DIRS)"
        raise TracesUnreadable(f"Only files under these folders can be named here: {roots}. Upload others instead.")
    return resolved


def describe(p: BudgetProposal) -> str:
    """The source in words, for the pages and the list of proposals."""
    if p.source == TRACES:
        return f"imported traces: {p.traces_name} (at most {p.tickets} tickets)"
    if p.source == SCENARIOS:
        return f"the outcome scenarios ({dict(SCENARIO_SETS).get(p.scenarios, p.scenarios)})"
    return f"the class's latest {p.tickets} tickets with recorded steps"
