from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "sundry.evals"
    label = "evals"

    def ready(self):
        # Register the budget lab's task in every process, the web process included: the desk queues
        # it by name, and without a broker the web process runs it itself (core.background). The lab
        # page also asks the harness, through `labsources`, whether it can read a traces file before it
        # keeps a proposal (the scenarios register their own check, `evals.scenarios.apps`).
        from sundry.desk.labsources import register_traces
        from sundry.evals import tasks  # noqa: F401
        from sundry.evals.labtraces import read_for_form

        register_traces(read_for_form)
