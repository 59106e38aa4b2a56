from django.apps import AppConfig


class ToolServersConfig(AppConfig):
    name = "sundry.toolservers"
    label = "toolservers"
    verbose_name = "Tool servers"

    def ready(self):
        # Every connection this process opens to a tool server passes the deployment's limits first,
        # however its spec was built; and `check --deploy` warns of limits left wide open.
        from sundry.tooling import mcp_client
        from sundry.toolservers import limits

        mcp_client.set_policy(limits.spec_refusal)
