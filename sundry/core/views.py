from django.contrib.auth import logout
from django.http import JsonResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST


@require_POST
def logout_view(request):
    logout(request)  # its user_logged_out signal closes the live sockets this session opened
    return redirect("login")


def healthz(request):
    return JsonResponse({"ok": True})
