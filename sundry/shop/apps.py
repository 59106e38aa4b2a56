from django.apps import AppConfig


class ShopConfig(AppConfig):
    name = "sundry.shop"
    label = "shop"
