from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "sundry.evals"
    label = "evals"

    def ready(self):
        # Register the budget lab's task in every process, the web process included: the desk queues
        # it by name, and without a broker the web process runs it itself (core.background).
        from sundry.evals import tasks  # noqa: F401
