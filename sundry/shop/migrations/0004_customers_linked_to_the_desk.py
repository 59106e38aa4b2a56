"""Each shop customer gets the desk's own record (`people.Customer`), linked by reference.

Reversing deletes the desk's records of the shop's customers (run after the tickets and
notice preferences point back at the shop's rows).
"""

from django.db import migrations

DOMAIN_NAME = "demo_shop"


def link(apps, schema_editor):
    Customer = apps.get_model("shop", "Customer")
    Person = apps.get_model("people", "Customer")
    Person.objects.bulk_create(
        [
            Person(
                domain=DOMAIN_NAME,
                external_key=c.customer_id,
                name=c.name,
                email=c.email,
                phone=c.phone,
                user_id=c.user_id,
            )
            for c in Customer.objects.all().iterator()
        ],
        batch_size=1000,
        ignore_conflicts=True,
    )


def unlink(apps, schema_editor):
    apps.get_model("people", "Customer").objects.filter(domain=DOMAIN_NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("shop", "0003_address_plural"),
        ("people", "0001_initial"),
    ]

    operations = [migrations.RunPython(link, unlink)]
