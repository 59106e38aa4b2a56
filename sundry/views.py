"""The front door: each person goes to their own place."""

from django.shortcuts import redirect

from sundry.people.selectors import role_of


def home(request):
    role = role_of(request.user)
    if role in {"staff", "admin"}:
        return redirect("desk-queue")
    if role == "customer":
        return redirect("portal-home")
    return redirect("login")
