import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tickets", "0008_agent_outbox_and_message_keys"),
    ]

    operations = [
        migrations.AddField(
            model_name="ticketclass",
            name="approval_window_hours",
            field=models.PositiveIntegerField(
                default=24,
                help_text="Approval thresholds on money apply to what was refunded (or awaits approval) over this "
                "many hours, per order and per customer, across tickets, in each currency.",
                validators=[
                    django.core.validators.MinValueValidator(1),
                    django.core.validators.MaxValueValidator(2160),
                ],
            ),
        ),
    ]
