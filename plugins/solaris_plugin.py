"""The SOLARIS page in the Airflow UI (the health app mounted at ``/solaris`` and a nav entry that frames it),
and the live clock's timetable, which Airflow deserializes only from a registered plugin.

Airflow imports this file from its plugins folder (in every component that loads plugins), so it stays
light: the app module imports the report's heavy dependencies only when the page is opened. Airflow does
not guard plugin apps with its login, so the app declares Airflow's own (:mod:`solaris.monitoring.airflow_login`).
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from solaris.live.timetable import SimulatedIntervals
from solaris.monitoring.airflow_login import guarded_app

URL_PREFIX = "/solaris"


class SolarisPlugin(AirflowPlugin):
    name = "solaris"
    timetables = [SimulatedIntervals]
    fastapi_apps = [{"app": guarded_app(), "url_prefix": URL_PREFIX, "name": "SOLARIS feature store"}]
    # A relative href resolves against the UI's base URL, so the frame still works when Airflow has a prefix.
    external_views = [
        {"name": "SOLARIS", "href": f"{URL_PREFIX.lstrip('/')}/", "url_route": "solaris", "destination": "nav"}
    ]
