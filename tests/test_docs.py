"""The configuration table (docs/deployment.md) names every environment variable the code reads;
the README stays a user's page."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READ = re.compile(
    r"""(?:environ(?:\.get)?\(\s*|environ\[|getenv\(|env_(?:bool|list|float|int)\(|_env\()\s*["']([A-Z][A-Z0-9_]{2,})["']"""
)


def variables_read() -> set[str]:
    names = set()
    for path in [*ROOT.glob("sundry/**/*.py"), *ROOT.glob("bin/*"), ROOT / "docker-compose.yml"]:
        names |= set(READ.findall(path.read_text(errors="replace")))
    return names


def test_every_variable_the_code_reads_is_documented():
    readme = (ROOT / "docs" / "deployment.md").read_text()
    found = variables_read()
    assert {"DATABASE_URL", "REDIS_URL", "SUNDRY_SECRET_KEY"} <= found  # the scan itself works
    missing = sorted(name for name in found if f"`{name}" not in readme)
    assert missing == [], f"not in the configuration table of docs/deployment.md: {missing}"


def test_the_readme_is_a_page_and_every_doc_link_leads_somewhere():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150, "the README is a user's first page: detail goes in docs/"
    assert re.findall(r"\]\((docs/[^)#]+)\)", readme), "the README points on to the docs"
    missing = []
    for page in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        for link in re.findall(r"\]\(([^)#]+)\)", page.read_text()):
            if not link.startswith(("http:", "https:", "mailto:")) and not (page.parent / link).exists():
                missing.append(f"{page.relative_to(ROOT)} → {link}")
    assert missing == [], f"links to files that do not exist: {missing}"
