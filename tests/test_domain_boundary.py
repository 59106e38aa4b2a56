"""The generic layers name no tool and no identifier format of the demo shop.

The shop is one domain (`sundry/shop/domain.py`); guards, effects, rules,
rendering, ID recognition and the summariser read its declaration. This test
reads the generic packages' source and fails on any shop tool name, any shop
ID (`SU-20481`, `cus_…`) or any shop ID pattern — comments and docstrings
included, since an example there is where a hard-coded name starts.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import sundry
from sundry.shop.domain import DOMAIN, ID_PATTERNS
from sundry.tooling.tools import REPLY_TOOL

ROOT = Path(sundry.__file__).parent
GENERIC = ("agent", "context", "compaction", "live", "tooling")
# Sundry's own reply tool: every domain may offer it, the loop posts its message.
SUNDRY_TOOLS = {REPLY_TOOL}
_META = set("\\[({.*+?^$|")


def _literal_prefix(pattern: str) -> str:
    out = ""
    for ch in pattern:
        if ch in _META:
            break
        out += ch
    return out


def shop_markers() -> list[tuple[str, re.Pattern]]:
    """(what, regex) for every shop tool name, ID pattern and ID shape a generic module must not hold."""
    out = [(f"tool {name}", re.compile(rf"\b{re.escape(name)}\b")) for name in DOMAIN.tools if name not in SUNDRY_TOOLS]
    for kind, pattern in ID_PATTERNS.items():
        # A concrete ID of the shop (SU-20481) …
        out.append((f"{kind} ID", re.compile(rf"(?<![0-9A-Za-z_-]){pattern}(?![0-9A-Za-z_])")))
        # … its pattern written out, or its prefix with a placeholder (SU-\d{5}, SU-…, cus_…).
        prefix = _literal_prefix(pattern)
        if len(prefix) >= 2:
            out.append((f"{kind} ID format", re.compile(rf"(?<![0-9A-Za-z_]){re.escape(prefix)}(?=\\|…|\.\.\.|\[)")))
    return out


def offences(files: list[Path]) -> list[str]:
    markers = shop_markers()
    found = []
    for path in files:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for what, rx in markers:
                if rx.search(line):
                    found.append(f"{path.relative_to(path.parents[2])}:{n}: {what}: {line.strip()[:100]}")
    return found


def generic_files() -> list[Path]:
    return sorted(p for pkg in GENERIC for p in (ROOT / pkg).rglob("*.py") if "migrations" not in p.parts)


def test_generic_layers_name_no_shop_tool_or_id_format():
    files = generic_files()
    assert len(files) > 40  # the scan reads the packages, not an empty list
    assert offences(files) == []


def test_generic_layers_do_not_import_the_shop():
    # `live` is left out: its panels read the shop's customer accounts (who is a customer), not its tools.
    imports = []
    for path in generic_files():
        if path.relative_to(ROOT).parts[0] == "live":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            imports += [
                f"{path.relative_to(ROOT)}: {n}" for n in names if n == "sundry.shop" or n.startswith("sundry.shop.")
            ]
    assert imports == []


def test_the_grep_finds_what_it_looks_for(tmp_path):
    # Negative control: planted shop knowledge in a generic-looking module is found, line by line.
    module = tmp_path / "sundry" / "agent" / "planted.py"
    module.parent.mkdir(parents=True)
    module.write_text(
        '"""Refunds go through issue_refund."""\n'
        'ORDER = r"SU-\\d{5}"\n'
        "# e.g. cancel SU-20481 for cus_ab12cd34\n"
        "HINT = 'look it up (rfd_…)'\n"
        "fine = 'get_order_details and reply_to_customer are not shop tools'\n"
    )
    found = offences([module])
    assert [f.split(":")[1] for f in found] == ["1", "2", "3", "3", "4"], found
    assert any("tool issue_refund" in f for f in found)
    assert any("order ID format" in f for f in found) and any("customer ID:" in f for f in found)


def test_the_markers_cover_every_shop_tool_and_format():
    whats = {what for what, _ in shop_markers()}
    assert {f"tool {n}" for n in DOMAIN.tools} - {f"tool {REPLY_TOOL}"} <= whats
    assert {f"{k} ID" for k in ID_PATTERNS} <= whats
