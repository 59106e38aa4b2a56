from django.urls import path

from sundry.tickets import views

urlpatterns = [
    path("", views.queue, name="desk-queue"),
    path("tickets/<int:ticket_id>/", views.ticket_detail, name="desk-ticket"),
    path("tickets/<int:ticket_id>/live", views.ticket_live, name="desk-ticket-live"),
    path("tickets/<int:ticket_id>/post", views.ticket_post, name="desk-ticket-post"),
    path("tickets/<int:ticket_id>/held/<int:held_id>", views.held_decide, name="desk-held-decide"),
]
