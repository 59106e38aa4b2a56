"""One stored file on one message turn.

The bytes live in the `attachments` storage (local files or an S3-compatible
bucket, settings.STORAGES) under a random key; the row says whose it is and
what it is, as sniffed from its content, never as its name or the browser said.
"""

from django.conf import settings
from django.db import models

from sundry.tickets.models import Ticket, Turn


class Attachment(models.Model):
    ticket = models.ForeignKey(Ticket, on_delete=models.CASCADE, related_name="attachments")
    # The message it came with: a customer's message or a staff reply (both shown to the customer).
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="attachments")
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The sender's file name, cleaned, its extension the sniffed type's: shown and offered on download.
    name = models.CharField(max_length=120)
    content_type = models.CharField(max_length=40)
    size = models.PositiveIntegerField(help_text="Bytes stored (after re-encoding an image).")
    original_size = models.PositiveIntegerField(help_text="Bytes the sender uploaded.")
    width = models.PositiveIntegerField(null=True, blank=True)
    height = models.PositiveIntegerField(null=True, blank=True)
    key = models.CharField(max_length=255, help_text="Where the bytes are in the attachments storage.")
    thumb_key = models.CharField(max_length=255, blank=True)
    sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["turn", "id"]

    def __str__(self):
        return f"{self.name} ({self.content_type}, ticket #{self.ticket_id})"

    @property
    def is_image(self) -> bool:
        return self.content_type.startswith("image/")
