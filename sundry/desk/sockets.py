"""The staff's websocket on a ticket: the desk's panels, live (sundry.live.consumers does the work)."""

from sundry.live.consumers import TicketWatcher
from sundry.live.panels import STAFF
from sundry.tickets.events import staff_group


class StaffTicketConsumer(TicketWatcher):
    audience = STAFF

    def ticket_group(self) -> str:
        return staff_group(self.ticket_id)
