from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tickets", "0020_budget_proposal_sources"),
    ]

    operations = [
        migrations.AddField(
            model_name="ticket",
            name="stamps",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
