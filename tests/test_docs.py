"""The README's configuration table names every environment variable the code reads."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READ = re.compile(r"""(?:environ(?:\.get)?\(\s*|environ\[|getenv\(|env_(?:bool|list|float|int)\(|_env\()\s*["']([A-Z][A-Z0-9_]{2,})["']""")


def variables_read() -> set[str]:
    names = set()
    for path in [*ROOT.glob("sundry/**/*.py"), *ROOT.glob("bin/*"), ROOT / "docker-compose.yml"]:
        names |= set(READ.findall(path.read_text(errors="replace")))
    return names


def test_every_variable_the_code_reads_is_documented():
    readme = (ROOT / "README.md").read_text()
    found = variables_read()
    assert {"DATABASE_URL", "REDIS_URL", "SUNDRY_SECRET_KEY"} <= found  # the scan itself works
    missing = sorted(name for name in found if f"`{name}" not in readme)
    assert missing == [], f"not in the README's configuration table: {missing}"
