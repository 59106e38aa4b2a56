from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "sundry.core"
    label = "core"
