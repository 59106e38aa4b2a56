from django.contrib.auth import logout
from django.http import JsonResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from sundry.core.people import role_of


def home(request):
    """Send each person to their own place."""
    role = role_of(request.user)
    if role in {"staff", "admin"}:
        return redirect("desk-queue")
    if role == "customer":
        return redirect("portal-home")
    return redirect("login")


@require_POST
def logout_view(request):
    logout(request)  # its user_logged_out signal closes the live sockets this session opened
    return redirect("login")


def healthz(request):
    return JsonResponse({"ok": True})
