"""The websocket stack: cookies, the session and the user in the scope, as Channels'
AuthMiddlewareStack puts them, without wrapping every send.

Channels' session middleware wraps `send` to save the session when an HTTP
response starts; for a websocket it only ever passes messages through, after
reading the lazy session twice. A push writes one message to each of hundreds
of sockets, so that check cost a noticeable share of a push. Here the session is
resolved the same way and messages go straight to the server. Sockets never
change the session (logins and logouts are HTTP requests).
"""

from __future__ import annotations

from channels.auth import AuthMiddleware
from channels.sessions import CookieMiddleware, InstanceSessionWrapper, SessionMiddleware


class ReadOnlySessionMiddleware(SessionMiddleware):
    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket":
            return await super().__call__(scope, receive, send)
        wrapper = InstanceSessionWrapper(scope, send)
        await wrapper.resolve_session()
        return await self.inner(wrapper.scope, receive, send)


def WebsocketAuthStack(inner):  # noqa: N802  (named like the Channels stack it stands in for)
    return CookieMiddleware(ReadOnlySessionMiddleware(AuthMiddleware(inner)))
