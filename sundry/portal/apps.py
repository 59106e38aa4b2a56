from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "sundry.portal"
    label = "portal"

    def ready(self):
        from sundry.portal import signals

        signals.connect()
