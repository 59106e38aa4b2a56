"""The websocket routes, behind the session middleware (`sundry.asgi`).

The ticket sockets read who they connect as with their access check, in one trip to the database
(`live.consumers._check`); the desk's list sockets take it from Channels' auth middleware.
"""

from channels.auth import AuthMiddleware
from django.urls import path

from sundry.desk import attention_feed
from sundry.desk import live_queue as queue
from sundry.desk.sockets import StaffTicketConsumer
from sundry.portal.sockets import CustomerTicketConsumer

websocket_urlpatterns = [
    path("ws/desk/queue/", AuthMiddleware(queue.QueueConsumer.as_asgi())),
    path("ws/desk/attention/", AuthMiddleware(attention_feed.AttentionConsumer.as_asgi())),
    path("ws/desk/tickets/<int:ticket_id>/", StaffTicketConsumer.as_asgi()),
    path("ws/help/tickets/<int:ticket_id>/", CustomerTicketConsumer.as_asgi()),
]
