"""What a tool server may reach, set by whoever deploys Sundry; the admin works inside it.

Four settings, read from the environment in `sundry/settings.py`:

- `SUNDRY_TOOL_ENV_PREFIX` (`TOOL_ENV_PREFIX`): a server's *env names* and *header
  env* may only name variables that start with it, and never one of Sundry's own
  (`OWN_VARIABLES`, and the namespaces in `OWN_NAMESPACES`), however wide the prefix.
- `SUNDRY_TOOL_COMMANDS` (`TOOL_COMMANDS`): the stdio command lines allowed. A
  server's command is allowed when it starts with one of them, word for word (what
  follows is the server's arguments); `python` is Sundry's interpreter, and words
  with a `/` are paths, read from where the command runs. None listed: no stdio.
- `SUNDRY_TOOL_HOSTS` (`TOOL_HOSTS`): the hosts (`host`, or `host:port`) HTTP
  servers may be reached at; `*.example.com` for a domain's hosts, `*` for any.
- `SUNDRY_TOOL_DECLARATIONS_DIR` (`TOOL_DECLARATIONS_DIRS`): the folder(s)
  declaration files must lie in, after `..` and symbolic links are resolved.

They are checked when a server is saved (`ToolServer.clean`, with a message naming
the setting) and again when Sundry connects or reads the declaration file, so a
row written some other way gets no further. A refusal is decided from the settings
and the text given alone — nothing outside the limits is contacted, started, or
opened — so its message is the same whether or not the host answers, the port is
open, the command exists or the file is there.

`deploy_checks` is a `manage.py check --deploy` warning for limits left wide open.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

import httpx2
from django.conf import settings
from django.core import checks

from sundry.toolservers.declfile import DeclarationError

# Variables Sundry reads itself (tests/toolservers/test_limits.py holds this to every name the code
# reads); tool servers never get them, whatever the prefix.
OWN_VARIABLES = frozenset(
    {
        "DATABASE_URL",
        "REDIS_URL",
        "DJANGO_SETTINGS_MODULE",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "OLLAMA_API_KEY",
        "OLLAMA_BASE_URL",
        "SUNDRY_TOOL_ENV_PREFIX",
        "SUNDRY_TOOL_COMMANDS",
        "SUNDRY_TOOL_HOSTS",
        "SUNDRY_TOOL_DECLARATIONS_DIR",
        "SUNDRY_TOOL_RESULT_MAX_BYTES",
    }
)
# Namespaces of Sundry's settings and of the libraries it runs (Django, Celery, the provider SDKs,
# libpq's PG* variables), present and future. `SUNDRY_TOOL_` is the tool servers' own.
OWN_NAMESPACES = ("SUNDRY_", "DJANGO_", "CELERY_", "OPENAI_", "ANTHROPIC_", "OLLAMA_", "PG", "REDIS_", "DATABASE_")
TOOL_NAMESPACE = "SUNDRY_TOOL_"
ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")

HOST_REFUSED = (
    "This URL is not one this deployment lets tool servers reach: an HTTP tool server must be an "
    "http(s) URL on a host (and port) listed in SUNDRY_TOOL_HOSTS, which whoever deploys Sundry sets."
)
COMMAND_REFUSED = (
    "This command is not one this deployment lets tool servers run: a stdio command must start "
    "with one of the command lines listed in SUNDRY_TOOL_COMMANDS, which whoever deploys Sundry sets."
)
STDIO_OFF = (
    "stdio tool servers are off in this deployment: SUNDRY_TOOL_COMMANDS lists no command. Reach the "
    "server over HTTP, or ask whoever deploys Sundry to list its command there."
)
DECLARATION_REFUSED = (
    "A declaration file must lie inside the declarations folder ({folders}, set by "
    "SUNDRY_TOOL_DECLARATIONS_DIR); this path does not."
)

PYTHON_NAMES = ("python", "python3")  # as `mcp_client.ServerSpec.argv`: Sundry's own interpreter
# Entries that allow a general-purpose program with any arguments: any code at all.
_OPEN_PROGRAMS = re.compile(
    r"(python[0-9.]*|pypy[0-9.]*|sh|bash|dash|zsh|ksh|fish|env|node|nodejs|deno|bun|npx|"
    r"npm|pnpm|yarn|uv|uvx|pipx|perl|ruby|php|java|docker|podman|sudo)"
)
_CODE_FLAGS = frozenset({"-c", "-e", "--eval", "-m", "-p", "--print", "exec", "run", "dlx"})


# --- environment variables ---------------------------------------------------------------------


def is_own_variable(name: str) -> bool:
    return name in OWN_VARIABLES or (name.startswith(OWN_NAMESPACES) and not name.startswith(TOOL_NAMESPACE))


def env_refusal(names) -> str:
    """Why these variable names may not be passed to a tool server ("" when they all may)."""
    prefix = settings.TOOL_ENV_PREFIX
    own = sorted({n for n in names if is_own_variable(n)})
    unprefixed = sorted({n for n in names if not n.startswith(prefix) and n not in own})
    problems = []
    if own:
        problems.append(
            f"{', '.join(own)}: Sundry's own settings; a tool server never receives {'them' if len(own) > 1 else 'it'}."
        )
    if unprefixed:
        problems.append(
            f"{', '.join(unprefixed)}: a tool server may only read environment variables whose names "
            f"start with {prefix} (SUNDRY_TOOL_ENV_PREFIX); put the value in one, e.g. "
            f"{prefix}{unprefixed[0]}."
        )
    return " ".join(problems)


# --- stdio commands ------------------------------------------------------------------------------


def _word(word: str, cwd: str) -> str:
    # A path (a word with a `/`, not an option) is compared as the absolute path it names where
    # the command runs; anything else as written.
    if "/" in word and not word.startswith("-"):
        return os.path.normpath(os.path.join(cwd, word))
    return word


def command_words(command: str, cwd: str | os.PathLike) -> list[str] | None:
    """The command line as the words compared with the allowed ones; None when it cannot be read."""
    try:
        words = shlex.split(command or "")
    except ValueError:
        return None
    if words and words[0] in PYTHON_NAMES:
        words[0] = sys.executable
    return [_word(w, str(cwd)) for w in words]


def allowed_commands() -> list[list[str]]:
    out = []
    for entry in settings.TOOL_COMMANDS:
        words = command_words(entry, settings.BASE_DIR)
        if words:
            out.append(words)
    return out


def command_refusal(command: str, cwd: str | os.PathLike) -> str:
    """Why `command`, run in `cwd`, may not be started ("" when it may)."""
    allowed = allowed_commands()
    if not allowed:
        return STDIO_OFF
    words = command_words(command, cwd)
    if words and any(words[: len(entry)] == entry for entry in allowed):
        return ""
    return COMMAND_REFUSED


def working_dir(value: str) -> str:
    """Where a stdio server's command runs: its working directory, relative to Sundry's; Sundry's by default."""
    return str(Path(settings.BASE_DIR) / value) if value else str(settings.BASE_DIR)


# --- HTTP hosts ------------------------------------------------------------------------------------


def _host_entry(entry: str) -> tuple[str, int | None]:
    entry = entry.strip().lower()
    if entry.startswith("["):  # [v6] or [v6]:port
        host, _, rest = entry[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif entry.count(":") == 1:
        host, port = entry.split(":")
    else:  # a name, v4, or a bare v6 address
        host, port = entry, ""
    return host.rstrip("."), int(port) if port.isdigit() else None


def _host_matches(entry: str, host: str, port: int) -> bool:
    want, want_port = _host_entry(entry)
    if want_port is not None and want_port != port:
        return False
    if want == "*":
        return True
    if want.startswith("*."):
        return host.endswith(want[1:]) and len(host) > len(want) - 1
    return host == want


def url_refusal(url: str) -> str:
    """Why an HTTP tool server at `url` may not be reached ("" when it may). The URL is read by the
    same parser the connection uses, so the host checked is the host connected to."""
    try:
        parsed = httpx2.URL(url or "")
        scheme, host = parsed.scheme, parsed.host.lower().rstrip(".")
        port = parsed.port or {"http": 80, "https": 443}.get(scheme)
    except Exception:  # noqa: BLE001  (anything it cannot read is refused, with the same words)
        return HOST_REFUSED
    if scheme not in ("http", "https") or not host or port is None:
        return HOST_REFUSED
    return "" if any(_host_matches(e, host, port) for e in settings.TOOL_HOSTS) else HOST_REFUSED


# --- declaration files -------------------------------------------------------------------------------


def declaration_folders() -> list[Path]:
    return [Path(settings.BASE_DIR) / Path(d) for d in settings.TOOL_DECLARATIONS_DIRS]


def declaration_file(path: str | os.PathLike) -> Path:
    """The file `path` names (relative to Sundry's directory), resolved, when it lies inside a declarations
    folder; otherwise `DeclarationError` with one text whatever is or is not at that path."""
    folders = declaration_folders()
    refused = DeclarationError(
        DECLARATION_REFUSED.format(
            folders=", ".join(str(f) for f in folders) or "none: no declaration file may be read"
        )
    )
    try:
        resolved = (Path(settings.BASE_DIR) / Path(path)).resolve()
        roots = [folder.resolve() for folder in folders]
        inside = any(resolved != root and resolved.is_relative_to(root) for root in roots)
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL byte …
        raise refused from None
    if not inside:
        raise refused
    return resolved


def declaration_refusal(path: str) -> str:
    if not path:
        return ""
    try:
        declaration_file(path)
    except DeclarationError as exc:
        return str(exc)
    return ""


# --- a server, and a connection about to be made -----------------------------------------------------


def field_refusals(server, *, well_formed_only: bool = False) -> dict[str, str]:
    """Field → why the deployment's limits refuse it, for a `ToolServer` (saved or not). With
    `well_formed_only` (the admin form, which refuses malformed names with its own message) only
    variable names that look like names are checked; at connect time every name is."""
    out = {}

    def checked(names):
        return [n for n in names if isinstance(n, str) and (not well_formed_only or ENV_NAME.fullmatch(n))]

    if server.transport == "http":
        if server.url and (why := url_refusal(server.url)):
            out["url"] = why
    elif server.command and (why := command_refusal(server.command, working_dir(server.working_dir))):
        out["command"] = why
    names = checked(server.env_name_list())
    if names and (why := env_refusal(names)):
        out["env_names"] = why
    variables = checked((server.header_env if isinstance(server.header_env, dict) else {}).values())
    if variables and (why := env_refusal(variables)):
        out["header_env"] = why
    if why := declaration_refusal(server.declaration_path):
        out["declaration_path"] = why
    return out


def server_refusal(server) -> str:
    """Why Sundry may not connect to `server` ("" when it may): its command or URL, and every variable it names."""
    refusals = field_refusals(server)
    refusals.pop("declaration_path", None)  # a refused file leaves the tools undeclared, said elsewhere
    return " ".join(refusals.values())


def spec_refusal(spec) -> str:
    """The check `mcp_client` makes before every connection (`mcp_client.set_policy`): the URL or the
    command, where it runs, and the variables copied into a stdio server's environment."""
    if spec.url:
        why = url_refusal(spec.url)
    else:
        why = command_refusal(spec.command, spec.cwd or os.getcwd())
    names = [k for k, _ in spec.env]
    return why or (env_refusal(names) if names else "")


# --- manage.py check --deploy ------------------------------------------------------------------------------


def _prefix_wide(prefix: str) -> bool:
    own = [n for n in OWN_VARIABLES if not n.startswith(TOOL_NAMESPACE)] + list(OWN_NAMESPACES)
    return not prefix or any(n.startswith(prefix) for n in own)


def _command_wide(words: list[str]) -> bool:
    program = os.path.basename(words[0])
    return bool(_OPEN_PROGRAMS.fullmatch(program)) and (len(words) == 1 or words[-1] in _CODE_FLAGS)


@checks.register(checks.Tags.security, deploy=True)
def deploy_checks(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    out = []
    if _prefix_wide(settings.TOOL_ENV_PREFIX):
        out.append(
            checks.Warning(
                f"SUNDRY_TOOL_ENV_PREFIX is {settings.TOOL_ENV_PREFIX!r}: an admin may send almost any environment "
                "variable of Sundry's to a tool server.",
                hint="Leave it at SUNDRY_TOOL_ (the default), or a prefix of your own ending in _.",
                id="sundry.toolservers.W001",
            )
        )
    wild = [h for h in settings.TOOL_HOSTS if "*" in h]
    if wild:
        out.append(
            checks.Warning(
                f"SUNDRY_TOOL_HOSTS has a wildcard ({', '.join(wild)}): an admin may point an HTTP tool server, and the "
                "secrets in its headers, at hosts nobody listed.",
                hint="Name each host (host or host:port) your tool servers run on.",
                id="sundry.toolservers.W002",
            )
        )
    wide = [c for c in settings.TOOL_COMMANDS if (w := command_words(c, settings.BASE_DIR)) and _command_wide(w)]
    if wide:
        out.append(
            checks.Warning(
                f"SUNDRY_TOOL_COMMANDS allows a general-purpose program with any arguments ({'; '.join(wide)}): an "
                "admin may run any code as Sundry.",
                hint="List each server's whole command (e.g. python -m mycompany.crm_mcp), not the interpreter.",
                id="sundry.toolservers.W003",
            )
        )
    base = Path(settings.BASE_DIR).resolve()
    broad = [
        f for f in declaration_folders() if f.resolve() == Path(f.resolve().anchor) or base.is_relative_to(f.resolve())
    ]
    if broad:
        out.append(
            checks.Warning(
                f"SUNDRY_TOOL_DECLARATIONS_DIR includes {', '.join(str(f) for f in broad)}, which holds Sundry's own "
                "files (or the whole disk): an admin may have Sundry open any of them as a declaration file.",
                hint="Keep declaration files in a folder of their own.",
                id="sundry.toolservers.W004",
            )
        )
    return out
