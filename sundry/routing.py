from django.urls import path

from sundry.desk import attention_feed
from sundry.desk import live_queue as queue
from sundry.desk.sockets import StaffTicketConsumer
from sundry.portal.sockets import CustomerTicketConsumer

websocket_urlpatterns = [
    path("ws/desk/queue/", queue.QueueConsumer.as_asgi()),
    path("ws/desk/attention/", attention_feed.AttentionConsumer.as_asgi()),
    path("ws/desk/tickets/<int:ticket_id>/", StaffTicketConsumer.as_asgi()),
    path("ws/help/tickets/<int:ticket_id>/", CustomerTicketConsumer.as_asgi()),
]
