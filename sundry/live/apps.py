from django.apps import AppConfig


class LiveConfig(AppConfig):
    name = "sundry.live"
    label = "live"
