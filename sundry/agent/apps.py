from django.apps import AppConfig


class AgentConfig(AppConfig):
    name = "sundry.agent"
    label = "agent"

    def ready(self):
        # Sundry's own tools first, then the domains' (settings.SUNDRY_DOMAINS): the registry's
        # order is the order tools are offered to the model in.
        from sundry.agent import tools  # noqa: F401  (registers request_staff_follow_up)
        from sundry.tooling.domain import load_domains

        load_domains()
