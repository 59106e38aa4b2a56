from django.apps import AppConfig


class ContextConfig(AppConfig):
    name = "sundry.context"
    label = "context"
