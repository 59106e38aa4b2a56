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
    from sundry.live.events import user_sockets_close

    user_id = request.user.pk if request.user.is_authenticated else None
    logout(request)
    if user_id is not None:  # the session is gone; close the live sockets it opened too
        user_sockets_close(user_id)
    return redirect("login")


def healthz(request):
    return JsonResponse({"ok": True})
