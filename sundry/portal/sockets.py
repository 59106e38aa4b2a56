"""The customer's websocket on their ticket: the customer page's panels and the reply as it is
written, worded as their messages are (sundry.live.consumers does the work)."""

from sundry.live.consumers import TicketWatcher
from sundry.live.panels import CUSTOMER
from sundry.portal.wording import customer_wording
from sundry.tickets.events import customer_group


class CustomerTicketConsumer(TicketWatcher):
    audience = CUSTOMER

    def stream_wording(self, text: str) -> str:
        return customer_wording(text)

    def ticket_group(self) -> str:
        return customer_group(self.ticket_id)
