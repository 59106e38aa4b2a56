from django.apps import AppConfig


class CompactionConfig(AppConfig):
    name = "sundry.compaction"
    label = "compaction"

    def ready(self):
        # Compaction may only start after a resolution step commits.
        from sundry.agent import loop
        from sundry.compaction.services import resolution_listener

        if resolution_listener not in loop.resolution_listeners:
            loop.resolution_listeners.append(resolution_listener)
