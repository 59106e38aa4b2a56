"""Sundry settings, read from the environment.

With nothing set, Sundry runs on its embedded default: SQLite, the in-process
channel layer, background work on an in-process executor, the offline model.
`DATABASE_URL` switches to PostgreSQL; `REDIS_URL` switches to the Channels
Redis layer and Celery workers over Redis. The code paths are the same.
"""

import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("SUNDRY_VAR_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


PRODUCTION = os.environ.get("SUNDRY_ENV", "development") == "production"
DEBUG = env_bool("SUNDRY_DEBUG", default=not PRODUCTION)


def weak_secret_key(key: str) -> str:
    """Why a secret key is too weak to sign production sessions ("" when it is not): Django's own
    deploy-check measure (50 characters, 5 distinct), or a placeholder left in."""
    lowered = key.lower()
    if len(key) < 50 or len(set(key)) < 5:
        return "it is shorter than 50 characters or has fewer than 5 distinct ones"
    if any(
        word in lowered
        for word in (
            "changeme",
            "change-me",
            "change_me",
            "insecure",
            "dev-only",
            "example",
            "placeholder",
            "your-secret",
            "secret-key",
        )
    ):
        return "it is a placeholder"
    return ""


if PRODUCTION:
    SECRET_KEY = os.environ["SUNDRY_SECRET_KEY"]  # no silent default in production
    if _weak := weak_secret_key(SECRET_KEY):
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            f"SUNDRY_SECRET_KEY is refused in production: {_weak}. Make one with "
            "python3 -c 'import secrets; print(secrets.token_urlsafe(50))'"
        )
else:
    SECRET_KEY = os.environ.get("SUNDRY_SECRET_KEY", "dev-only-insecure-key-change-me-for-anything-real")

ALLOWED_HOSTS = env_list("SUNDRY_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
# The reverse proxies in front of the web process (addresses or networks): only their
# X-Forwarded-For is believed (sundry.web.proxy_options). Empty: none is.
TRUSTED_PROXIES = env_list("SUNDRY_TRUSTED_PROXIES")
CSRF_TRUSTED_ORIGINS = env_list("SUNDRY_CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "axes",
    "sundry.core",
    "sundry.people",
    "sundry.shop",
    "sundry.tickets",
    "sundry.context",
    "sundry.toolservers",
    "sundry.agent",
    "sundry.attachments",
    "sundry.compaction",
    "sundry.live",
    "sundry.desk",
    "sundry.portal",
    "sundry.evals",
    # The outcome scenarios as an app of their own: the budget lab's scenario source registers itself from
    # here, so the harness's package never imports the scenarios (which build on it).
    "sundry.evals.scenarios",
]

# The domains tickets are worked in: modules that register a `tooling.domain.Domain` when
# imported (its tools, identifier formats, prompt). A ticket class names one; the default
# is SUNDRY_DEFAULT_DOMAIN.
SUNDRY_DOMAINS = ["sundry.shop.domain"]
SUNDRY_DEFAULT_DOMAIN = "demo_shop"
# The ticket class (its slug) a customer's new conversation opens in: a deployment whose customers
# are served by a class with tool servers names that class here (sundry/portal/views.py).
DEFAULT_TICKET_CLASS = os.environ.get("SUNDRY_DEFAULT_TICKET_CLASS", "standard").strip()

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "sundry.core.security.RefuseNulBytesMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # A database out of reach answers 503 (try again), not a 500 page.
    "sundry.core.middleware.DatabaseUnavailableMiddleware",
    "sundry.core.htmx_auth.HtmxSignInMiddleware",
    "csp.middleware.CSPMiddleware",
    "sundry.core.security.SecurityHeadersMiddleware",
    # Last, as django-axes documents: it turns a locked-out login into its lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "sundry.urls"
ASGI_APPLICATION = "sundry.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "sundry.context_processors.sundry",
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------
DATABASE_URL = os.environ.get("DATABASE_URL", "")
if DATABASE_URL:
    # Django's own backend. No persistent connections: Django's docs advise against them
    # under ASGI (each request may run on another thread, and connections left behind are
    # never reused), and an agent run or task opens one connection for seconds of work.
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "sundry.sqlite3",
            # The in-process worker writes while the web thread reads; wait for locks.
            "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: channel layer and Celery -------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
CHANNEL_PREFIX = os.environ.get("SUNDRY_CHANNEL_PREFIX", "sundry")
# redis-py 8 reads with a 5 s socket timeout by default; keep idle layer
# connections well clear of it (channels_redis #422).
CHANNEL_REDIS_SOCKET_TIMEOUT = float(os.environ.get("SUNDRY_CHANNEL_SOCKET_TIMEOUT", "15"))
if REDIS_URL:
    # channels_redis's pub/sub layer: a push to a ticket's group is one PUBLISH,
    # and each web process holds one subscription per group however many of its
    # sockets joined it. Pub/sub delivers at most once; a missed push is repaired
    # by the page's version check and resync.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "socket_timeout": CHANNEL_REDIS_SOCKET_TIMEOUT,
                        "socket_connect_timeout": 2.0,
                    }
                ],  # a push never hangs its request for long
                "prefix": CHANNEL_PREFIX,
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# Django's cache: Redis when configured, so rate limits hold across web processes.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": CHANNEL_PREFIX,
        }
    }

# Time limits are sized for one agent step, not a whole run (see "Recovery" in the README):
# a task starts no step after AGENT_SLICE_SECONDS and queues the rest of the run as a new
# task, so a step that starts in time ends within the soft limit unless it hangs. The hard
# limit follows the soft one; the broker's visibility timeout exceeds the hard limit, or a
# slow task is redelivered to a second worker while the first still runs it.
TASK_HARD_TIME_LIMIT = int(os.environ.get("SUNDRY_TASK_HARD_LIMIT", "300"))
CELERY_BROKER_URL = REDIS_URL or None
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_TASK_TIME_LIMIT = TASK_HARD_TIME_LIMIT
CELERY_TASK_SOFT_TIME_LIMIT = TASK_HARD_TIME_LIMIT - 30
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A killed worker's task is redelivered once the visibility timeout passes;
# keep it just above the hard limit so recovery is not slower than it must be.
# Bounded connects and reads, keepalive and a health check, so a Redis restart is noticed
# and a post never hangs on a Redis that does not answer.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": TASK_HARD_TIME_LIMIT + 60,
    "socket_connect_timeout": 5,
    "socket_timeout": 30,
    "socket_keepalive": True,
    "retry_on_timeout": True,
    "health_check_interval": 25,
}
# A worker keeps trying to reach the broker for as long as Redis is away (the default gives
# up after 100 tries and the worker exits).
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# A task running when the broker connection drops finishes, and its acknowledgement waits for
# the new connection; its redelivered copy finds the ticket claimed or answered.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
# A worker keeps its PostgreSQL connection from task to task for this many seconds
# (sundry/core/workerdb.py): connecting cost each agent run 7–20 ms. Before a task's first query
# the connection is checked (CONN_HEALTH_CHECKS: one empty round trip) and replaced if the server
# restarted or dropped it; one an error went through is closed after its task. The web process
# keeps a connection per request (CONN_MAX_AGE=0, above). 0: a connection per task, as before.
WORKER_CONN_MAX_AGE = int(os.environ.get("SUNDRY_WORKER_CONN_MAX_AGE", "300"))
WORKER_CONN_HEALTH_CHECKS = env_bool("SUNDRY_WORKER_CONN_HEALTH_CHECKS", True)
if WORKER_CONN_MAX_AGE:
    # Celery's Django fixup closes the connection around every task unless told to reuse it; it
    # then closes it every this-many tasks, and `workerdb` closes it by age, error or failed check.
    CELERY_DB_REUSE_MAX = 1000
# Queuing from a request tries briefly, then gives up: the outbox mark on the ticket keeps
# the wake-up, and the sweep queues it once Redis is back.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5}
# One model call (sundry.agent.provider.gateway.CallLimits): per-attempt connect and read
# timeouts, a deadline for the whole call with the provider SDK's retries (which
# honour Retry-After), and the longest answer asked for.
MODEL_CONNECT_TIMEOUT = float(os.environ.get("SUNDRY_MODEL_CONNECT_TIMEOUT", "5"))
MODEL_READ_TIMEOUT = float(os.environ.get("SUNDRY_MODEL_READ_TIMEOUT", "60"))
MODEL_CALL_TIMEOUT = float(os.environ.get("SUNDRY_MODEL_CALL_TIMEOUT", "150"))
MODEL_MAX_RETRIES = int(os.environ.get("SUNDRY_MODEL_MAX_RETRIES", "2"))
MODEL_MAX_TOKENS = int(os.environ.get("SUNDRY_MODEL_MAX_TOKENS", "2048"))
# Stream the agent's replies to the customer page and the desk as they are written, where the
# provider streams (the stored turn is still the whole reply after the reply check).
MODEL_STREAM = env_bool("SUNDRY_MODEL_STREAM", True)
# Ask the provider to count a request's tokens where it has an endpoint for it (Anthropic's
# count_tokens) when the compaction trigger weighs the request; off, or if the count fails,
# the trigger uses Sundry's count calibrated against the tokens providers reported.
MODEL_PROVIDER_TOKEN_COUNT = env_bool("SUNDRY_MODEL_PROVIDER_TOKEN_COUNT", False)
# An agent run holds its ticket with a claim it renews at every step. A claim
# older than this is a dead run's (its worker was killed): the next run takes
# the ticket. Longer than one step can take (one model call, at most
# MODEL_CALL_TIMEOUT with its retries).
AGENT_CLAIM_TTL_SECONDS = int(os.environ.get("SUNDRY_AGENT_CLAIM_TTL", str(int(MODEL_CALL_TIMEOUT) + 60)))
if MODEL_CALL_TIMEOUT >= AGENT_CLAIM_TTL_SECONDS:
    raise ImproperlyConfigured(
        "SUNDRY_MODEL_CALL_TIMEOUT must be shorter than SUNDRY_AGENT_CLAIM_TTL, "
        "or a slow step's ticket is taken by another run."
    )
# One agent run (sundry.agent.loop): at most this many steps (model calls that lead to tool calls or a reply),
# and no new step after this many seconds; either way a run that stops mid-task flags the ticket for staff.
AGENT_MAX_STEPS_PER_RUN = int(os.environ.get("SUNDRY_AGENT_MAX_STEPS", "10"))
AGENT_RUN_DEADLINE_SECONDS = int(os.environ.get("SUNDRY_AGENT_RUN_DEADLINE", "600"))
# One step's longest time: its model time, then tools and writes. The model time is
# MODEL_CALL_TIMEOUT for the answer and its re-ask together (a reply asked for again gets only
# what the first answer left, `agent.answer.obtain`), so no step outlasts this.
AGENT_STEP_MODEL_SECONDS = MODEL_CALL_TIMEOUT
AGENT_STEP_SECONDS = int(AGENT_STEP_MODEL_SECONDS) + 30
# A task starts steps until this much time has passed, then queues the rest of the run.
AGENT_SLICE_SECONDS = max(0, CELERY_TASK_SOFT_TIME_LIMIT - AGENT_STEP_SECONDS)
if AGENT_STEP_SECONDS > CELERY_TASK_SOFT_TIME_LIMIT:
    raise ImproperlyConfigured(
        "SUNDRY_TASK_HARD_LIMIT must leave room for one agent step "
        f"({AGENT_STEP_SECONDS} s with SUNDRY_MODEL_CALL_TIMEOUT) before the soft limit."
    )
# An agent run the database failed under (a restart, a dropped connection, a serialization
# failure) is retried this many times, after these many seconds (the last repeats), then
# stopped with an error turn and an attention flag (sundry.agent.tasks).
AGENT_DB_RETRIES = int(os.environ.get("SUNDRY_AGENT_DB_RETRIES", "8"))
AGENT_DB_RETRY_COUNTDOWNS = tuple(
    float(s) for s in os.environ.get("SUNDRY_AGENT_DB_RETRY_COUNTDOWNS", "2,5,15,30,60").split(",") if s.strip()
)
if AGENT_DB_RETRIES < 0 or not AGENT_DB_RETRY_COUNTDOWNS:
    raise ImproperlyConfigured(
        "SUNDRY_AGENT_DB_RETRIES must be 0 or more, and SUNDRY_AGENT_DB_RETRY_COUNTDOWNS "
        "a comma-separated list of seconds."
    )
# The outbox sweep (Celery beat, `sundry.agent.sweep`): every AGENT_SWEEP_SECONDS, tickets
# whose wake-up is older than AGENT_SWEEP_GRACE_SECONDS and no live claim holds are queued
# again. Recovery from a lost worker is bounded by the claim TTL plus one sweep interval.
AGENT_SWEEP_SECONDS = float(os.environ.get("SUNDRY_AGENT_SWEEP_SECONDS", "30"))
AGENT_SWEEP_GRACE_SECONDS = float(os.environ.get("SUNDRY_AGENT_SWEEP_GRACE", "60"))
CELERY_BEAT_SCHEDULE = {
    "agent-sweep": {"task": "sundry.agent.sweep", "schedule": AGENT_SWEEP_SECONDS},
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("SUNDRY_TASK_QUEUE", "sundry")
# Without a broker, tasks run on an in-process executor after commit (sundry.core.background).
BACKGROUND_MODE = "celery" if REDIS_URL else "in-process"

# --- Auth -----------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Login throttling (django-axes) on both login forms, the desk's and the admin's: after
# SUNDRY_LOGIN_FAILURE_LIMIT wrong passwords for one username from one address, that
# pair is locked out for SUNDRY_LOGIN_COOLOFF_MINUTES, the right password included.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = int(os.environ.get("SUNDRY_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=int(os.environ.get("SUNDRY_LOGIN_COOLOFF_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "core/locked_out.html"
AXES_VERBOSE = False
AXES_USERNAME_CALLABLE = "sundry.core.security.login_username"  # cut to the longest username

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("SUNDRY_STATIC_ROOT", BASE_DIR / "staticfiles"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if PRODUCTION
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}

# --- Attachments (sundry/attachments): what a message may carry, and where the files live ---------
# Files are served only through views that check who is asking, never from a public URL: the local
# folder is not under any served path, and a bucket needs no public access.
ATTACHMENT_MAX_BYTES = int(float(os.environ.get("SUNDRY_ATTACHMENT_MAX_MB", "10")) * 1024 * 1024)
ATTACHMENT_MAX_FILES = int(os.environ.get("SUNDRY_ATTACHMENT_MAX_FILES", "4"))
# Images larger than this are refused before a pixel is decoded (a decompression bomb is a small file).
ATTACHMENT_MAX_PIXELS = int(float(os.environ.get("SUNDRY_ATTACHMENT_MAX_MEGAPIXELS", "40")) * 1_000_000)
# Of image/jpeg, image/png, image/webp and application/pdf: the kinds accepted (by content, not name).
ATTACHMENT_TYPES = env_list("SUNDRY_ATTACHMENT_TYPES", "image/jpeg,image/png,image/webp,application/pdf")
# A file past the limit is counted, not spooled to disk (sundry/attachments/uploads.py).
FILE_UPLOAD_HANDLERS = [
    "sundry.attachments.uploads.CappedUploadHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
_attachment_storage = os.environ.get("SUNDRY_ATTACHMENT_STORAGE", "local")
if _attachment_storage == "local":
    STORAGES["attachments"] = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {
            "location": str(Path(os.environ.get("SUNDRY_ATTACHMENT_DIR", VAR_DIR / "attachments"))),
            "base_url": "/no-public-url/",
            "file_permissions_mode": 0o640,
            "directory_permissions_mode": 0o750,
        },
    }
elif _attachment_storage == "s3":
    # django-storages' S3 backend (the optional extra `pip install sundry[s3]`); credentials come the
    # way boto3 finds them (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, a profile or an instance role).
    STORAGES["attachments"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": os.environ.get("SUNDRY_S3_BUCKET", ""),
            "endpoint_url": os.environ.get("SUNDRY_S3_ENDPOINT_URL") or None,
            "region_name": os.environ.get("SUNDRY_S3_REGION") or None,
            "location": os.environ.get("SUNDRY_S3_PREFIX", "attachments"),
            "default_acl": None,
            "querystring_auth": True,
            "file_overwrite": False,
        },
    }
    if not STORAGES["attachments"]["OPTIONS"]["bucket_name"]:
        raise ImproperlyConfigured("SUNDRY_ATTACHMENT_STORAGE=s3 needs SUNDRY_S3_BUCKET.")
else:
    raise ImproperlyConfigured(f"SUNDRY_ATTACHMENT_STORAGE must be local or s3, not {_attachment_storage!r}.")

# --- Sundry ---------------------------------------------------------------------
# The budget lab's imported traces: the folders whose files an admin may name on the page (uploads
# come from anywhere; `manage.py budget_lab --traces` reads any file its operator can).
LAB_TRACE_DIRS = env_list(
    "SUNDRY_LAB_TRACE_DIRS", f"{BASE_DIR.resolve().parent / 'shared' / 'corpora'},{VAR_DIR / 'traces'}"
)
# Customer messages above this many characters are refused with the limit named.
MAX_MESSAGE_CHARS = int(os.environ.get("SUNDRY_MAX_MESSAGE_CHARS", "4000"))
# Per person: customer messages and new tickets (each may start a model call), as
# "count/period" with period s, m, h, d or seconds.
RATE_CUSTOMER_MESSAGES = os.environ.get("SUNDRY_RATE_CUSTOMER_MESSAGES", "12/m")
RATE_CUSTOMER_TICKETS = os.environ.get("SUNDRY_RATE_CUSTOMER_TICKETS", "10/h")
DEMO_SEED = int(os.environ.get("SUNDRY_DEMO_SEED", "20261129"))

# --- E-mail: customers' notices that a reply or a card waits (sundry.portal.notices) ----------
# Development prints mail on the worker's console; production sends over SMTP unless told
# otherwise. The notice links to the page, so it needs the site's public address.
_EMAIL_BACKENDS = {
    "console": "django.core.mail.backends.console.EmailBackend",
    "smtp": "django.core.mail.backends.smtp.EmailBackend",
    "file": "django.core.mail.backends.filebased.EmailBackend",
    "locmem": "django.core.mail.backends.locmem.EmailBackend",
}
_email_backend = os.environ.get("SUNDRY_EMAIL_BACKEND", "smtp" if PRODUCTION else "console")
if _email_backend not in _EMAIL_BACKENDS:
    raise ImproperlyConfigured(
        f"SUNDRY_EMAIL_BACKEND must be one of {', '.join(_EMAIL_BACKENDS)}, not {_email_backend!r}."
    )
EMAIL_BACKEND = _EMAIL_BACKENDS[_email_backend]
EMAIL_HOST = os.environ.get("SUNDRY_EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("SUNDRY_EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("SUNDRY_EMAIL_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("SUNDRY_EMAIL_PASSWORD", "")
EMAIL_USE_TLS = env_bool("SUNDRY_EMAIL_STARTTLS")
EMAIL_USE_SSL = env_bool("SUNDRY_EMAIL_SSL")
EMAIL_TIMEOUT = 20  # seconds: a task that hangs on a mail server holds a worker
EMAIL_FILE_PATH = os.environ.get("SUNDRY_EMAIL_FILE_PATH", str(VAR_DIR / "mail"))
DEFAULT_FROM_EMAIL = os.environ.get("SUNDRY_EMAIL_FROM", "Sundry support <support@localhost>")
PUBLIC_URL = os.environ.get("SUNDRY_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")

# --- Tool servers: what an admin's tool server may read, run, reach and open ------------
# (sundry/toolservers/limits.py; checked when a server is saved and again when Sundry connects.)
# Environment variables a server may name (stdio env, HTTP headers) start with this; Sundry's own
# settings (DATABASE_URL, provider keys, SUNDRY_* …) never pass, whatever the prefix.
TOOL_ENV_PREFIX = os.environ.get("SUNDRY_TOOL_ENV_PREFIX", "SUNDRY_TOOL_").strip()
# stdio command lines allowed (a server's command must start with one), comma- or newline-separated
# (newlines when a command holds a comma). None: stdio servers are off. Production lists none unless
# told; development allows the repository's own example server, so the demo and its README work.
_tool_commands = os.environ.get(
    "SUNDRY_TOOL_COMMANDS", "" if PRODUCTION else "python examples/tau2_retail_mcp/server.py"
)
TOOL_COMMANDS = [
    c.strip()
    for c in (_tool_commands.splitlines() if "\n" in _tool_commands else _tool_commands.split(","))
    if c.strip()
]
# Hosts (host or host:port; *.domain, * for any) HTTP tool servers may be reached at.
TOOL_HOSTS = env_list("SUNDRY_TOOL_HOSTS", "127.0.0.1,localhost,::1")
# The folder(s) declaration files must lie in (several separated by os.pathsep, as in PATH);
# relative to Sundry's directory.
TOOL_DECLARATIONS_DIRS = [
    BASE_DIR / d.strip()
    for d in os.environ.get("SUNDRY_TOOL_DECLARATIONS_DIR", "examples").split(os.pathsep)
    if d.strip()
]

# The most of one tool-server result kept (bytes of its text): past it the result is cut, the model
# and staff are told, and nothing in it is harvested (a runaway listing costs neither memory nor a
# request's whole budget).
TOOL_RESULT_MAX_BYTES = int(os.environ.get("SUNDRY_TOOL_RESULT_MAX_BYTES", str(64 * 1024)))

# --- Headers on every response (sundry/core/security.py) ---------------------------
# Scripts and styles come only from our own static files (htmx runs with eval off, so
# no 'unsafe-eval'); sockets go back to the same origin.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}
PERMISSIONS_POLICY = "camera=(), microphone=(), geolocation=(), payment=(), usb=(), interest-cohort=()"
# Error pages in DEBUG hide settings whose names say they carry credentials; Django's
# default pattern misses connection URLs such as DATABASE_URL and REDIS_URL.
DEFAULT_EXCEPTION_REPORTER_FILTER = "sundry.core.security.CredentialsHidingFilter"

# --- Live panels (websockets) ------------------------------------------------------
# Renderings of ticket panels and conversation items kept per web process, so a
# push to many watchers renders once; least recently used go first past this
# many bytes (0: keep none, every watcher renders its own).
LIVE_RENDER_CACHE_BYTES = int(float(os.environ.get("SUNDRY_LIVE_RENDER_CACHE_MB", "32")) * 1024 * 1024)
# A conversation opens at its latest this many turns (the desk) or messages (the customer
# page); earlier ones load as the reader scrolls up. A push reads and renders only what is new.
# 0: the whole conversation, re-read on every push (as before; the benchmarks' control).
LIVE_CONVERSATION_WINDOW = int(os.environ.get("SUNDRY_LIVE_CONVERSATION_WINDOW", "50"))
# A push re-reads only the panels whose tables its writes stamped (sundry.tickets.versions); a
# panel that also shows records kept outside the ticket (the customer's orders and other tickets)
# is re-read on a push at least this many seconds after it was last read.
LIVE_OUTSIDE_SECONDS = float(os.environ.get("SUNDRY_LIVE_OUTSIDE_SECONDS", "10"))
# Open sockets one user may hold in one web process, and all sockets of a web
# process; past either a new socket is closed with a code saying why (4429 / 1013).
LIVE_MAX_SOCKETS_PER_USER = int(os.environ.get("SUNDRY_LIVE_MAX_SOCKETS_PER_USER", "20"))
LIVE_MAX_SOCKETS_PER_PROCESS = int(os.environ.get("SUNDRY_LIVE_MAX_SOCKETS_PER_PROCESS", "5000"))
# The sockets' database calls take PostgreSQL connections from a pool of at most this many
# (sundry.live.dbtrips); 0: a connection per call, as requests and tasks have. The web process
# (python -m sundry.web) sets 2 unless the environment says otherwise; other processes leave it 0.
LIVE_DB_POOL = int(os.environ.get("SUNDRY_LIVE_DB_POOL", "0") or 0)
# The web process (python -m sundry.web) freezes what it loaded at start out of the
# garbage collector's full passes and collects young objects less often.
WEB_GC_TUNING = env_bool("SUNDRY_WEB_GC_TUNING", True)

# --- Production hardening (checked by `manage.py check --deploy`) -----------------
if PRODUCTION:
    SECURE_SSL_REDIRECT = env_bool("SUNDRY_SSL_REDIRECT", True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(os.environ.get("SUNDRY_HSTS_SECONDS", "31536000"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_CONTENT_TYPE_NOSNIFF = True
    SECURE_REFERRER_POLICY = "same-origin"
    X_FRAME_OPTIONS = "DENY"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("SUNDRY_LOG_LEVEL", "WARNING")},
    "loggers": {"sundry": {"level": os.environ.get("SUNDRY_LOG_LEVEL", "INFO")}},
}
