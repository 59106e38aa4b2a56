"""Served under /help/ (the ticket's customer) and /desk/ (staff); see views.py."""

from django.urls import path

from sundry.attachments import views

_FILE = "tickets/<int:ticket_id>/files/<int:attachment_id>"

portal_patterns = [
    path(_FILE, views.customer_file, name="portal-attachment"),
    path(_FILE + "/thumb", views.customer_file, {"variant": "thumb"}, name="portal-attachment-thumb"),
]
desk_patterns = [
    path(_FILE, views.desk_file, name="desk-attachment"),
    path(_FILE + "/thumb", views.desk_file, {"variant": "thumb"}, name="desk-attachment-thumb"),
]
