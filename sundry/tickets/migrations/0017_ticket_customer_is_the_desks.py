"""A ticket's customer is the desk's own record (`people.Customer`), not the shop's row.

The desk's records were made from the shop's customers (shop 0004); each ticket is repointed
to the record whose external reference names its shop customer. Reversible: the steps run
backwards, pointing tickets at the shop's rows again.
"""

import django.db.models.deletion
from django.db import migrations, models

DOMAIN_NAME = "demo_shop"


def to_desk(apps, schema_editor):
    Ticket = apps.get_model("tickets", "Ticket")
    Person = apps.get_model("people", "Customer")
    people = dict(Person.objects.filter(domain=DOMAIN_NAME).values_list("external_key", "pk"))
    for pk, key in Ticket.objects.values_list("pk", "shop_customer__customer_id"):
        Ticket.objects.filter(pk=pk).update(person_id=people[key])


def to_shop(apps, schema_editor):
    Ticket = apps.get_model("tickets", "Ticket")
    Customer = apps.get_model("shop", "Customer")
    shop = dict(Customer.objects.values_list("customer_id", "pk"))
    for pk, domain, key in Ticket.objects.values_list("pk", "person__domain", "person__external_key"):
        if domain != DOMAIN_NAME or key not in shop:
            raise RuntimeError(f"ticket {pk}: its customer ({domain} {key}) is not one of the shop's")
        Ticket.objects.filter(pk=pk).update(shop_customer_id=shop[key])


class Migration(migrations.Migration):
    dependencies = [
        ("tickets", "0016_budget_proposals_and_class_changes"),
        ("shop", "0004_customers_linked_to_the_desk"),
        ("people", "0001_initial"),
    ]

    operations = [
        migrations.RenameField("ticket", "customer", "shop_customer"),
        migrations.AlterField(
            "ticket",
            "shop_customer",
            models.ForeignKey(
                null=True, on_delete=django.db.models.deletion.PROTECT, related_name="+", to="shop.customer"
            ),
        ),
        migrations.AddField(
            "ticket",
            "person",
            models.ForeignKey(
                null=True, on_delete=django.db.models.deletion.PROTECT, related_name="tickets", to="people.customer"
            ),
        ),
        migrations.RunPython(to_desk, to_shop),
        migrations.RemoveField("ticket", "shop_customer"),
        migrations.RenameField("ticket", "person", "customer"),
        migrations.AlterField(
            "ticket",
            "customer",
            models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT, related_name="tickets", to="people.customer"
            ),
        ),
    ]
