"""ASGI entry point: HTTP through Django, websockets through Channels."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sundry.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from sundry.live.middleware import WebsocketAuthStack  # noqa: E402
from sundry.live.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(WebsocketAuthStack(URLRouter(websocket_urlpatterns))),
    }
)

# Everything loaded so far lives as long as the process: keep it out of the
# collector's full passes, which otherwise stall every socket for tens of ms.
# Young collections run every 20,000 allocations rather than 700: a push to
# hundreds of sockets allocates in bursts, and each extra pass lands in one.
import gc  # noqa: E402

gc.collect()
gc.freeze()
gc.set_threshold(20_000, 20, 20)

