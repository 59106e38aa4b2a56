from django.urls import path

from sundry.live import attention_feed, consumers, queue

websocket_urlpatterns = [
    path("ws/desk/queue/", queue.QueueConsumer.as_asgi()),
    path("ws/desk/attention/", attention_feed.AttentionConsumer.as_asgi()),
    path("ws/desk/tickets/<int:ticket_id>/", consumers.StaffTicketConsumer.as_asgi()),
    path("ws/help/tickets/<int:ticket_id>/", consumers.CustomerTicketConsumer.as_asgi()),
]
