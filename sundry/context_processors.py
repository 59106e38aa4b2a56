from django.conf import settings

from sundry.people.selectors import role_of


def sundry(request):
    """Facts every page may show: which background mode runs and the viewer's role."""
    return {
        "background_mode": settings.BACKGROUND_MODE,
        "viewer_role": role_of(request.user) if hasattr(request, "user") else "anonymous",
    }
