from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from sundry import views
from sundry.attachments import urls as attachment_urls
from sundry.core import views as core_views

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(template_name="core/login.html"), name="login"),
    path("logout/", core_views.logout_view, name="logout"),
    path("healthz", core_views.healthz, name="healthz"),
    path("desk/", include("sundry.desk.urls")),
    path("desk/", include(attachment_urls.desk_patterns)),
    path("help/", include("sundry.portal.urls")),
    path("help/", include(attachment_urls.portal_patterns)),
    path("admin/", admin.site.urls),
]

# A database out of reach is a 503 wherever in the request it surfaced (see the handler).
handler500 = "sundry.core.middleware.server_error"
