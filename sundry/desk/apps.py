from django.apps import AppConfig


class DeskConfig(AppConfig):
    """Staff's pages over the ticket record: the queue, a ticket's view and panels, search, the admin's figures."""

    name = "sundry.desk"
    label = "desk"

    def ready(self):
        from sundry.desk import panels  # noqa: F401  (registers the staff audience with the panel kit)
