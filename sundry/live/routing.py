from django.urls import path

from sundry.live import consumers

websocket_urlpatterns = [
    path("ws/desk/tickets/<int:ticket_id>/", consumers.StaffTicketConsumer.as_asgi()),
    path("ws/help/tickets/<int:ticket_id>/", consumers.CustomerTicketConsumer.as_asgi()),
]
