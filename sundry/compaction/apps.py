from django.apps import AppConfig


class CompactionConfig(AppConfig):
    name = "sundry.compaction"
    label = "compaction"

    def ready(self):
        # Compaction may only start after a resolution step commits.
        from sundry.agent import loop, step
        from sundry.compaction.services import compact_before_step, resolution_listener

        if resolution_listener not in loop.resolution_listeners:
            loop.resolution_listeners.append(resolution_listener)
        # A request over the budget is compacted in place before it is sent.
        if compact_before_step not in step.before_request_hooks:
            step.before_request_hooks.append(compact_before_step)
