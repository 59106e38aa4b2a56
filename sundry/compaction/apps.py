from django.apps import AppConfig


class CompactionConfig(AppConfig):
    name = "sundry.compaction"
    label = "compaction"
