from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tickets", "0018_approval_rules_help_names_no_tool"),
    ]

    operations = [
        migrations.AddField(
            model_name="budgetproposal",
            name="working_model",
            field=models.CharField(blank=True, max_length=120),
        ),
        migrations.AddField(
            model_name="budgetproposal",
            name="summariser_model",
            field=models.CharField(blank=True, max_length=120),
        ),
        migrations.AddField(
            model_name="budgetproposal",
            name="call_summariser",
            field=models.BooleanField(default=False),
        ),
    ]
