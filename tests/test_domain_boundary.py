"""Outside the demo shop, nothing names a tool, an identifier format or a model of the shop.

The shop is one domain (`sundry/shop/domain.py`); guards, effects, rules,
rendering, ID recognition and the summariser read its declaration, and the
desk keeps its own customer record (`sundry/people`). This test reads the
source of every package but the shop and the harness (`DOMAIN_PACKAGES`), and
the templates, and fails on any shop tool name, any shop ID (`SU-20481`,
`cus_…`), any shop ID pattern or any of the shop's own state-field names
(those shaped like an identifier and not among the generic fields, which
plain words like "issue" would only match falsely) — comments and
docstrings included, since an example there is where a hard-coded name
starts — and on any import of `sundry.shop`. The generic layers (`GENERIC`) and the desk have no exceptions:
the desk reads tool cards, money and a domain's records from the domain
(`DESK_EXCEPTIONS` stays empty unless an entry says why), and an exception that
no longer matches anything fails too, so the list only shrinks.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import sundry
from sundry.shop.domain import DOMAIN, ID_PATTERNS
from sundry.tooling.domain import GENERIC_STATE_FIELDS
from sundry.tooling.tools import REPLY_TOOL

ROOT = Path(sundry.__file__).parent
TEMPLATES = ROOT.parent / "templates"
GENERIC = ("agent", "context", "compaction", "live", "tooling")
# The domain's own packages: the demo shop, and the harness that drives the shop's and τ²'s scenarios.
DOMAIN_PACKAGES = ("shop", "evals")
# Packages the desk scan must find (a new package is covered without being named here).
DESK = ("tickets", "portal", "people", "attachments", "toolservers", "core")
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


def shop_field_names() -> list[str]:
    """The shop's own state fields a generic module must not name: identifier-shaped (`order_number`;
    a plain word such as "issue" or "item" is prose everywhere) and not a generic field every domain has."""
    generic = {f.name for f in GENERIC_STATE_FIELDS}
    return [f.name for f in DOMAIN.state_fields if "_" in f.name and f.name not in generic]


def shop_markers() -> list[tuple[str, re.Pattern]]:
    """(what, regex) for every shop tool name, ID pattern, ID shape and own state field a generic module
    must not hold."""
    out = [(f"tool {name}", re.compile(rf"\b{re.escape(name)}\b")) for name in DOMAIN.tools if name not in SUNDRY_TOOLS]
    out += [(f"state field {name}", re.compile(rf"\b{re.escape(name)}\b")) for name in shop_field_names()]
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


def covered_packages() -> tuple[str, ...]:
    """Every package of sundry but the domain's own: a new package (`desk/`) is covered as it lands."""
    return tuple(
        sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").exists() and p.name not in DOMAIN_PACKAGES)
    )


def covered_files() -> list[Path]:
    files = [p for pkg in covered_packages() for p in (ROOT / pkg).rglob("*.py") if "migrations" not in p.parts]
    return sorted(files + list(TEMPLATES.rglob("*.html")))


def _where(path: Path) -> str:
    """A file as the exceptions name it: `sundry/<package>/…` or `templates/…`."""
    return str(path.relative_to(ROOT.parent)) if path.is_relative_to(ROOT.parent) else path.name


# Desk code that still names the shop, with why. Each entry: (file, what it names) → reason. The desk
# learns tool cards (`ToolDecl.card`), which writes move money (`Domain.moves_money`), all it shows of a
# domain's records and which state field names a ticket's record (`tooling.records`) from the domain. A
# new entry needs its reason here.
_PLACEHOLDER = (
    "the canned replies' {order_number} placeholder keeps its name for the replies stored with it; "
    "its value is the domain's record field (`Records.pick_field`)"
)
DESK_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("sundry/desk/canned.py", "state field order_number"): _PLACEHOLDER,
    ("sundry/desk/sidebar.py", "state field order_number"): _PLACEHOLDER,
    ("sundry/tickets/models.py", "state field order_number"): _PLACEHOLDER,
}


def shop_imports(files: list[Path]) -> list[tuple[str, str]]:
    """(file, "import <module>") for each import of sundry.shop in the Python files."""
    found = []
    for path in files:
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [
                (_where(path), f"import {n}") for n in names if n == "sundry.shop" or n.startswith("sundry.shop.")
            ]
    return found


def desk_findings(files: list[Path]) -> set[tuple[str, str]]:
    markers = shop_markers()
    found = set(shop_imports(files))
    for path in files:
        for line in path.read_text().splitlines():
            found |= {(_where(path), what) for what, rx in markers if rx.search(line)}
    return found


def test_generic_layers_name_no_shop_tool_or_id_format():
    files = generic_files()
    assert len(files) > 40  # the scan reads the packages, not an empty list
    assert offences(files) == []


def test_generic_layers_do_not_import_the_shop():
    assert shop_imports(generic_files()) == []


def test_the_desk_names_the_shop_only_where_an_exception_says_why():
    covered = covered_packages()
    assert set(GENERIC) | set(DESK) <= set(covered), covered
    files = covered_files()
    assert any(p.suffix == ".html" for p in files) and len(files) > 150  # the scan reads packages and templates
    found = desk_findings(files)
    assert sorted(found - set(DESK_EXCEPTIONS)) == []
    # An exception the code no longer needs goes from the list.
    assert sorted(set(DESK_EXCEPTIONS) - found) == []


def test_the_desk_scan_finds_what_it_looks_for(tmp_path):
    # Negative control: a desk module that imports the shop to know who is a customer, and a
    # template naming a shop tool, are both found.
    module = tmp_path / "sundry" / "desk" / "planted.py"
    module.parent.mkdir(parents=True)
    module.write_text("from sundry.shop.models import Customer\nimport sundry.shop.people\n")
    template = tmp_path / "sundry" / "desk" / "planted.html"
    template.write_text('{% if name == "cancel_order" %}…{% endif %}\n')
    found = {what for _, what in desk_findings([module, template])}
    assert found == {"import sundry.shop.models", "import sundry.shop.people", "tool cancel_order"}, found


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
    # The shop's own fields, read from its declaration; the generic ones every domain has are not markers.
    assert {"state field order_number", "state field refund_method", "state field delivery_date"} <= whats
    assert not {"state field contact_preference", "state field internal_note", "state field issue"} & whats


def test_the_grep_finds_a_shop_state_field(tmp_path):
    # Negative control: a tool description listing the shop's fields in a generic module is found; the
    # generic fields and plain words are not.
    module = tmp_path / "sundry" / "context" / "planted.py"
    module.parent.mkdir(parents=True)
    module.write_text(
        'DESCRIPTION = "Record a fact (order_number, issue, item, refund_method, delivery_date)"\n'
        'FINE = "issue, amount, contact_preference, internal_note; the resolution of an item"\n'
    )
    found = offences([module])
    assert [f.split(": ")[1] for f in found] == [
        "state field order_number",
        "state field refund_method",
        "state field delivery_date",
    ], found
