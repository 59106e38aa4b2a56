"""The desk's own record of a customer: who they are, how to reach them, their login.

A ticket belongs to one of these, never to a domain's record. The domain that knows the
customer (the demo shop, a tool server's system) is named by reference: its name and its
own key for the customer. The desk passes that key to the domain's tools; the domain
resolves it to its own records. A domain writes these rows through
`sundry.people.services.customer_link`, so the desk never reads a domain's tables to learn
who is a customer.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Customer(models.Model):
    name = models.CharField(max_length=120)
    email = models.EmailField(blank=True)
    phone = models.CharField(max_length=32, blank=True)
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="desk_customer"
    )
    # The external reference: which domain knows this customer, and under which key.
    domain = models.CharField(max_length=64, help_text="The domain that knows this customer (tooling.domain name).")
    external_key = models.CharField(max_length=64, help_text="The domain's own key for the customer.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["domain", "external_key"], name="customer_one_per_reference")]
        indexes = [models.Index(fields=["external_key"])]

    def __str__(self):
        return f"{self.name} ({self.external_key})"
