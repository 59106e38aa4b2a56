from django.apps import AppConfig


class PeopleConfig(AppConfig):
    name = "sundry.people"
    label = "people"
    verbose_name = "customers"
