from django.apps import AppConfig


class AttachmentsConfig(AppConfig):
    name = "sundry.attachments"
    label = "attachments"
