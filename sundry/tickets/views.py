from django.shortcuts import render


def queue(request):
    return render(request, "tickets/queue.html", {})


def ticket_detail(request, ticket_id):
    return render(request, "tickets/ticket.html", {})
