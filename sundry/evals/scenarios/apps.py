from django.apps import AppConfig


class ScenariosConfig(AppConfig):
    name = "sundry.evals.scenarios"
    label = "evals_scenarios"

    def ready(self):
        # The budget lab replays a proposal on the outcome scenarios: its run (`evals.labrun`) and the lab
        # page's form (`desk.labsources`) find this source here, registered in every process.
        from sundry.desk.labsources import register_scenarios
        from sundry.evals.labrun import register_source
        from sundry.evals.scenarios.lab import proposal_figures, scenarios_problem

        register_scenarios(scenarios_problem)
        register_source("scenarios", proposal_figures)
