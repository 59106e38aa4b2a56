from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "sundry.portal"
    label = "portal"
