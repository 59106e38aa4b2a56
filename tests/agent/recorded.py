"""The recorded τ²-bench conversations beside the checkout: GPT-4.1's replies to simulated customers, and each
domain's tools as τ²-bench declared them. Real words nobody on the project wrote, for measuring false flags."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sundry.evals import sources
from sundry.evals.importers import tau2_results


def traces() -> Path:
    found = sources.tau2_traces_dir()  # read at call time, so a run may point it elsewhere
    if found is None:
        pytest.skip("the τ²-bench traces (../shared/corpora/tau2/traces) are not beside this checkout")
    return found


def replies() -> list[tuple[str, str]]:
    """(domain, reply) for every agent reply of the recorded conversations (882 in the three files)."""
    out = []
    for path in sorted(traces().glob("*.json")):
        domain = path.name.split("_")[1]
        out += [
            (domain, t.text)
            for ticket in tau2_results(path)
            for t in ticket.turns
            if t.author == "agent" and t.kind == "message" and t.text.strip()
        ]
    return out


def tool_specs(domain: str) -> list[dict]:
    """A τ²-bench domain's tools as offered to the model: the docstring's summary is the description, its
    "Args:" lines the parameters'."""
    path = traces().parent / "domains" / domain / "tools.json"
    out = []
    for tool in json.loads(path.read_text()):
        summary, _, rest = (tool.get("docstring") or "").partition("Args:")
        args = re.split(r"\n\s*(?:Returns|Raises):", rest)[0]
        params = {
            m[1]: {"type": "string", "description": re.sub(r"\s+", " ", m[2]).strip()}
            for m in re.finditer(r"^\s*(\w+)(?:\s*\([^)]*\))?:\s*(.+(?:\n\s{8,}.+)*)", args, re.M)
        }
        out.append(
            {"name": tool["name"], "description": " ".join(summary.split()), "parameters": {"properties": params}}
        )
    return out
