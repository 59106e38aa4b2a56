from django.apps import AppConfig


class ShopConfig(AppConfig):
    name = "sundry.shop"
    label = "shop"

    def ready(self):
        from sundry.shop import people, records
        from sundry.tooling.records import register_records

        people.connect()
        # What the desk shows of the shop's orders, asked by domain name (the desk never imports the shop).
        register_records(records.RECORDS)
