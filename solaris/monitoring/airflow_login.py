"""The SOLARIS page behind Airflow's login, as the api-server mounts it.

Airflow guards its own REST API with a dependency on its routers; a plugin app is mounted, and a mount inherits
none of its parent's dependencies, so the app declares the same one: Airflow's ``get_user`` (a bearer token, or
the UI's session cookie) and the auth manager's answer for a plugin's view. An anonymous browser is sent to
Airflow's login and back; a script gets the 401.

Airflow is imported inside the calls: the plugin module that builds this app is imported by every Airflow
component, and only the api-server ever serves it.
"""

from __future__ import annotations

from fastapi import Depends, FastAPI, HTTPException, Request, Response, status
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import RedirectResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from solaris.monitoring.app import create_app

VIEW_NAME = "SOLARIS"  # the custom view the auth manager is asked about


async def require_airflow_login(request: Request) -> None:
    """Airflow's own user dependency, then the auth manager's custom-view check (403 where it says no)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    user = await get_user(request, None, await bearer_scheme(request))
    if not get_auth_manager().is_authorized_custom_view(method="GET", resource_name=VIEW_NAME, user=user):
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"user {user.get_name()} may not view {VIEW_NAME}")


async def login_redirect(request: Request, exc: StarletteHTTPException) -> Response:
    """A browser asking for a page without a login goes to Airflow's login, which brings it back."""
    wants_page = "text/html" in request.headers.get("accept", "")
    if exc.status_code == status.HTTP_401_UNAUTHORIZED and request.method == "GET" and wants_page:
        from airflow.api_fastapi.app import get_auth_manager

        login = get_auth_manager().get_url_login(next_url=str(request.url))
        return RedirectResponse(login, status_code=status.HTTP_303_SEE_OTHER)
    return await http_exception_handler(request, exc)


def guarded_app() -> FastAPI:
    """The health app with every route behind Airflow's login."""
    app = create_app(dependencies=[Depends(require_airflow_login)])
    app.add_exception_handler(StarletteHTTPException, login_redirect)
    return app
