"""A notice preference belongs to the desk's customer record (`people.Customer`), not the shop's
row; each is repointed through the record's external reference. Reversible like tickets 0017."""

import django.db.models.deletion
from django.db import migrations, models

DOMAIN_NAME = "demo_shop"


def to_desk(apps, schema_editor):
    Pref = apps.get_model("portal", "NoticePreference")
    Person = apps.get_model("people", "Customer")
    people = dict(Person.objects.filter(domain=DOMAIN_NAME).values_list("external_key", "pk"))
    for pk, key in Pref.objects.values_list("pk", "shop_customer__customer_id"):
        Pref.objects.filter(pk=pk).update(person_id=people[key])


def to_shop(apps, schema_editor):
    Pref = apps.get_model("portal", "NoticePreference")
    Customer = apps.get_model("shop", "Customer")
    shop = dict(Customer.objects.values_list("customer_id", "pk"))
    for pk, domain, key in Pref.objects.values_list("pk", "person__domain", "person__external_key"):
        if domain == DOMAIN_NAME and key in shop:
            Pref.objects.filter(pk=pk).update(shop_customer_id=shop[key])
        else:  # a preference of a customer the shop does not know has nowhere to go back to
            Pref.objects.filter(pk=pk).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("portal", "0001_initial"),
        ("shop", "0004_customers_linked_to_the_desk"),
        ("people", "0001_initial"),
    ]

    operations = [
        migrations.RenameField("noticepreference", "customer", "shop_customer"),
        migrations.AlterField(
            "noticepreference",
            "shop_customer",
            models.OneToOneField(
                null=True, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="shop.customer"
            ),
        ),
        migrations.AddField(
            "noticepreference",
            "person",
            models.OneToOneField(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="notice_preference",
                to="people.customer",
            ),
        ),
        migrations.RunPython(to_desk, to_shop),
        migrations.RemoveField("noticepreference", "shop_customer"),
        migrations.RenameField("noticepreference", "person", "customer"),
        migrations.AlterField(
            "noticepreference",
            "customer",
            models.OneToOneField(
                on_delete=django.db.models.deletion.CASCADE, related_name="notice_preference", to="people.customer"
            ),
        ),
    ]
