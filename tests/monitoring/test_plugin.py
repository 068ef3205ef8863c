"""The Airflow plugin: what it declares, and that Airflow's plugin manager loads it from the plugins folder."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from types import ModuleType

from fastapi import FastAPI

from solaris.airflow_env import PLUGINS_FOLDER, airflow_env
from solaris.config import Settings


def _plugin_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("solaris_plugin", PLUGINS_FOLDER / "solaris_plugin.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_plugin_declares_the_app_and_the_nav_entry() -> None:
    plugin = _plugin_module().SolarisPlugin

    [app] = plugin.fastapi_apps
    assert isinstance(app["app"], FastAPI) and app["url_prefix"] == "/solaris"
    assert {route.path for route in app["app"].routes} >= {"/", "/api/health"}
    [view] = plugin.external_views
    assert view["name"] == "SOLARIS" and view["destination"] == "nav" and view["url_route"] == "solaris"
    assert view["href"] == "solaris/"  # relative to the UI's base URL, which is where the app is mounted


def test_airflow_loads_the_plugin_from_the_configured_folder(settings: Settings) -> None:
    """In a child process: Airflow fixes its configuration when first imported."""
    env = os.environ | airflow_env(settings)
    done = subprocess.run(
        [sys.executable, "-m", "airflow", "plugins", "--output", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert done.returncode == 0, done.stderr[-3000:]
    [plugin] = [p for p in json.loads(done.stdout) if p["name"] == "solaris"]
    [app] = plugin["fastapi_apps"]
    assert (app["url_prefix"], app["app"]) == ("/solaris", "fastapi.applications.FastAPI")
    assert [v["url_route"] for v in plugin["external_views"]] == ["solaris"]
