from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "sundry.portal"
    label = "portal"

    def ready(self):
        from sundry.portal import panels, signals  # noqa: F401  (panels: registers the customer audience)

        signals.connect()
