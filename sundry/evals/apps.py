from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "sundry.evals"
    label = "evals"
