from django.urls import path

from sundry.desk import admin_views, lab_views, trend_views, views

urlpatterns = [
    path("", views.queue, name="desk-queue"),
    path("figures/", admin_views.figures, name="desk-figures"),
    path("figures/lab/<int:class_id>/", lab_views.budget_lab, name="desk-budget-lab"),
    path("figures/lab/<int:class_id>/run", lab_views.budget_lab_run, name="desk-budget-lab-run"),
    path(
        "figures/lab/<int:class_id>/proposals/<int:proposal_id>/",
        lab_views.budget_proposal,
        name="desk-budget-proposal",
    ),
    path(
        "figures/lab/<int:class_id>/proposals/<int:proposal_id>/apply",
        lab_views.budget_proposal_apply,
        name="desk-budget-proposal-apply",
    ),
    path("figures/trends/<int:class_id>/", trend_views.class_trends, name="desk-trends"),
    path("figures/trends/<int:class_id>/<str:week>/<str:figure>/", trend_views.trend_week, name="desk-trend-week"),
    path("search/", views.search, name="desk-search"),
    path("tickets/<int:ticket_id>/update", views.ticket_update, name="desk-ticket-update"),
    path("tickets/<int:ticket_id>/", views.ticket_detail, name="desk-ticket"),
    path("tickets/<int:ticket_id>/post", views.ticket_post, name="desk-ticket-post"),
    path("tickets/<int:ticket_id>/turns/", views.ticket_turns, name="desk-turns"),
    path("tickets/<int:ticket_id>/attention/clear", views.attention_clear, name="desk-attention-clear"),
    path("tickets/<int:ticket_id>/held/<int:held_id>", views.held_decide, name="desk-held-decide"),
    path("tickets/<int:ticket_id>/cards/<int:card_id>", views.card_decide, name="desk-card-decide"),
    path("tickets/<int:ticket_id>/state", views.state_edit, name="desk-state-edit"),
    path("tickets/<int:ticket_id>/rules/<int:rule_id>", views.rule_decide, name="desk-rule-decide"),
    path("tickets/<int:ticket_id>/ledger/rename", views.ledger_rename, name="desk-ledger-rename"),
    path("tickets/<int:ticket_id>/ledger/correct", views.ledger_correct, name="desk-ledger-correct"),
    path("tickets/<int:ticket_id>/ledger/archived", views.ledger_archived, name="desk-ledger-archived"),
    path("tickets/<int:ticket_id>/compactions/<int:run_id>", views.compaction_detail, name="desk-compaction"),
]
