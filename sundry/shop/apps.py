from django.apps import AppConfig


class ShopConfig(AppConfig):
    name = "sundry.shop"
    label = "shop"

    def ready(self):
        from sundry.shop import people

        people.connect()
