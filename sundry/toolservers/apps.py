from django.apps import AppConfig


class ToolServersConfig(AppConfig):
    name = "sundry.toolservers"
    label = "toolservers"
    verbose_name = "Tool servers"
