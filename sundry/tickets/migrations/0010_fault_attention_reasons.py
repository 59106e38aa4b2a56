from django.db import migrations, models


class Migration(migrations.Migration):
    """One reason per cause on the attention line: several may be up at once, so no fixed width."""

    dependencies = [
        ("tickets", "0009_lim_approval_window"),
    ]

    operations = [
        migrations.AlterField(
            model_name="ticket",
            name="attention",
            field=models.TextField(blank=True),
        ),
    ]
