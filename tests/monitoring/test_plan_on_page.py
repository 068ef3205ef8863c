"""The last capacity plan on the health page: its curve, and today's knobs set against its knee."""

from __future__ import annotations

import os
from datetime import timedelta

from fastapi.testclient import TestClient
from health_world import CHAMPION_AE, CHAMPION_FM, DIM, HealthWorld, T, run_key
from plan_curves import write_plan

from solaris.config import Settings
from solaris.embedding_version import embedding_version
from solaris.monitoring.app import create_app
from solaris.store import open_store


def _client(settings: Settings) -> TestClient:
    return TestClient(create_app(settings=lambda: settings, clock=lambda: T))


def test_without_a_plan_the_page_says_how_to_make_one(health_world: HealthWorld) -> None:
    client = _client(health_world.settings)
    assert "no capacity plan yet" in client.get("/").text
    assert client.get("/api/health").json()["plan"] is None


def test_todays_defaults_past_the_knee_stand_out_on_the_plans_curve(health_world: HealthWorld) -> None:
    write_plan(health_world.settings)
    client = _client(health_world.settings)

    plan = client.get("/api/health").json()["plan"]
    assert plan["today_from"].startswith("the knobs' defaults")  # no run recorded its ttl_hours
    assert plan["today"]["past_knee"] is True and plan["today"]["fm_budget"] == 60_000
    assert plan["plan"]["knee"]["fm_budget"] == 4_000
    page = client.get("/").text
    assert '<p id="operating-point" class="past-knee">' in page
    assert "fm_budget 60,000 is past the knee&#39;s 4,000" in page
    assert 'id="chart-plan"' in page and "today&#39;s fm_budget" in page and ">knee<" in page


def test_the_latest_finished_runs_knobs_are_todays(health_world: HealthWorld) -> None:
    write_plan(health_world.settings)
    start = T.replace(hour=11)
    key = run_key(11)
    with open_store(health_world.settings.store_url) as store:  # hour 11 again, now succeeded at a lower budget
        version = embedding_version(CHAMPION_FM, CHAMPION_AE, DIM)
        store.start_run(key, start, start + timedelta(hours=1), CHAMPION_FM, CHAMPION_AE, "7", version, start)
        store.finish_run(key, "succeeded", {"fm_budget": 3_000, "ttl_hours": 8}, {}, start + timedelta(hours=1))

    plan = _client(health_world.settings).get("/api/health").json()["plan"]
    assert plan["today_from"] == f"run {key}"
    assert (plan["today"]["fm_budget"], plan["today"]["ttl_hours"], plan["today"]["past_knee"]) == (3_000, 8, False)
    assert "ttl_hours 8 where the knee's is 4" in plan["today"]["sentence"]


def test_an_unreadable_plan_is_named_and_the_page_still_serves(health_world: HealthWorld) -> None:
    write_plan(health_world.settings, '{"world": "x"}')
    response = _client(health_world.settings).get("/")
    assert response.status_code == 200
    assert "capacity plan unreadable:</strong>" in response.text and "not a plan SOLARIS wrote" in response.text


def test_the_plan_of_the_world_production_serves_is_shown_before_a_newer_one(health_world: HealthWorld) -> None:
    settings = health_world.settings
    other = write_plan(settings)  # world "synthetic", production's is settings.world
    page = _client(settings).get("/").text
    assert 'id="plan-other-world"' in page and f"not of {settings.world}, the world production serves" in page

    own = write_plan(settings, world=settings.world)
    os.utime(own, (0, 0))  # older than the other world's
    plan = _client(settings).get("/api/health").json()["plan"]
    assert (plan["plan"]["world"], plan["path"], plan["other_world"]) == (settings.world, str(own), None)
    assert 'id="plan-other-world"' not in _client(settings).get("/").text
    assert other.exists()
