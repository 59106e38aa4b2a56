from django.apps import AppConfig


class AgentConfig(AppConfig):
    name = "sundry.agent"
    label = "agent"
