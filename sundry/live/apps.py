from django.apps import AppConfig


class LiveConfig(AppConfig):
    name = "sundry.live"
    label = "live"

    def ready(self):
        from sundry.live import signals

        signals.connect()
