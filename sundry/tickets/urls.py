from django.urls import path

from sundry.tickets import views

urlpatterns = [
    path("", views.queue, name="desk-queue"),
    path("tickets/<int:ticket_id>/", views.ticket_detail, name="desk-ticket"),
]
