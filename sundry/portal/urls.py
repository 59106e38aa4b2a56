from django.urls import path

from sundry.portal import rating, views

urlpatterns = [
    path("", views.home, name="portal-home"),
    path("notices", views.notice_setting, name="portal-notice-setting"),
    path("tickets/new", views.ticket_new, name="portal-ticket-new"),
    path("tickets/<int:ticket_id>/", views.ticket_detail, name="portal-ticket"),
    path("tickets/<int:ticket_id>/message", views.ticket_message, name="portal-ticket-message"),
    path("tickets/<int:ticket_id>/messages/", views.ticket_messages, name="portal-messages"),
    path("tickets/<int:ticket_id>/order", views.order_pick, name="portal-order-pick"),
    path("tickets/<int:ticket_id>/cards/<int:card_id>", views.card_decide, name="portal-card-decide"),
    path(
        "tickets/<int:ticket_id>/instructions/<int:rule_id>/withdraw", views.rule_withdraw, name="portal-rule-withdraw"
    ),
    path("tickets/<int:ticket_id>/flag", views.detail_flag, name="portal-detail-flag"),
    path("tickets/<int:ticket_id>/rating", rating.ticket_rate, name="portal-ticket-rate"),
]
