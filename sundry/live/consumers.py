from channels.generic.websocket import AsyncJsonWebsocketConsumer


class StaffTicketConsumer(AsyncJsonWebsocketConsumer):
    pass
