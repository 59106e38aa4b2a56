from django.conf import settings


def sundry(request):
    """Facts every page may show: which background mode runs and the viewer's role."""
    from sundry.core.people import role_of

    return {
        "background_mode": settings.BACKGROUND_MODE,
        "viewer_role": role_of(request.user) if hasattr(request, "user") else "anonymous",
    }
