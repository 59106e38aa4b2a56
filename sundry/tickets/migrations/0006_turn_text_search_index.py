"""A full-text index on turn text for desk search (PostgreSQL only; SQLite searches by substring)."""

from django.db import migrations

# The expression SearchVector("text", config="english") compiles to, so the planner uses the index.
EXPRESSION = "to_tsvector('english'::regconfig, COALESCE(\"tickets_turn\".\"text\", ''))"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS tickets_turn_text_fts ON tickets_turn USING gin ({EXPRESSION})"
        )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS tickets_turn_text_fts")


class Migration(migrations.Migration):
    dependencies = [("tickets", "0005_desk_lifecycle")]
    operations = [migrations.RunPython(create, drop)]
