from django.apps import AppConfig


class TicketsConfig(AppConfig):
    name = "sundry.tickets"
    label = "tickets"
