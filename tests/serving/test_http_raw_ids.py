"""/rank on an imported world takes the ids as its log had them (text or any int64), maps them through the
world's id map to the store's dense ids, echoes them as sent, and serves an id it has never seen cold."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Layout, T, assert_refused_naming
from fastapi.testclient import TestClient
from precompute_env import LEAD
from raw_id_logs import RAW_MAPPING, SPELLINGS, write_raw_id_log

from solaris.config import Settings
from solaris.data.idmap import IdMaps
from solaris.data.importer import import_file
from solaris.serving import Ranker
from solaris.serving import app as serving_app
from solaris.serving.app import Service, ServiceConfig, create_app
from solaris.serving.champion import ServingModel

CONFIG = ServiceConfig(max_candidates=50)
AT = T.isoformat()


@pytest.fixture(params=list(SPELLINGS))
def spelling(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def ids(tmp_path: Path, spelling: str) -> IdMaps:
    """An imported world's map: raw user u and item i are dense u and i, as the layout's store holds them."""
    log = import_file(write_raw_id_log(tmp_path / "log.csv", spelling), tmp_path / "world", RAW_MAPPING)
    return IdMaps.read(log.root)


@pytest.fixture
def client(layout: Layout, champion: ServingModel, ids: IdMaps) -> Iterator[TestClient]:
    service = Service({LEAD.name: Ranker(layout.store, champion, store_timeout_s=1.0)}, {}, CONFIG.poll_seconds, ids)
    with TestClient(create_app(service, CONFIG)) as client:
        yield client


def test_raw_ids_are_ranked_through_the_worlds_map(client: TestClient, spelling: str) -> None:
    """User 1 has an aggregate and a pair row for item 10 (dense ids): only their raw ids reach them."""
    user, item = SPELLINGS[spelling]
    answer = client.post("/rank", json={"user_id": user(1), "items": [item(11), item(10)], "at": AT})

    assert answer.status_code == 200
    body = answer.json()
    assert body["tiers"] == ["agg", "pair"] and all(0 < s < 1 for s in body["scores"])
    assert body["user_id"] == user(1)  # as sent, its type included


def test_an_id_never_seen_is_served_cold_not_refused(client: TestClient, spelling: str) -> None:
    user, item = SPELLINGS[spelling]
    for unseen_user, unseen_item in (("nobody", "no-ad"), (2**63 - 1, -(2**63))):
        answer = client.post("/rank", json={"user_id": unseen_user, "items": [unseen_item, item(10)], "at": AT})
        assert answer.status_code == 200
        assert answer.json()["tiers"] == ["none", "none"] and answer.json()["user_id"] == unseen_user
    known = client.post("/rank", json={"user_id": user(1), "items": ["no-ad", item(10)], "at": AT}).json()
    assert known["tiers"] == ["agg", "pair"]


@pytest.mark.parametrize(
    ("request_body", "field", "message"),
    [
        ({"user_id": "x" * 257, "items": ["a"]}, "user_id", "at most 256 characters"),
        ({"user_id": "", "items": ["a"]}, "user_id", "at least 1 character"),
        ({"user_id": 2**63, "items": ["a"]}, "user_id", "less than 9223372036854775808"),
        ({"user_id": True, "items": ["a"]}, "user_id", "must be a JSON integer"),
        ({"user_id": "u", "items": [7, "7"]}, "items", "item id 7 appears more than once"),
        ({"user_id": "u", "items": [2.5]}, "items", "must be a JSON integer, got 2.5"),
    ],
)
def test_raw_ids_outside_the_limits_are_422_naming_the_field(
    client: TestClient, request_body: dict, field: str, message: str
) -> None:
    assert_refused_naming(client, request_body, field, message)


def test_the_ranker_loads_the_map_of_the_world_it_serves(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: Layout
) -> None:
    """``SOLARIS_WORLD`` names the world; its map is read once, at start. A generated world has none."""
    import solaris.store
    from solaris.tracking import registry

    monkeypatch.setattr(solaris.store, "open_configured_store", lambda settings: layout.store)
    monkeypatch.setattr(registry, "connect", lambda settings: None)
    assert serving_app.service_from_settings(settings, CONFIG).ids is None  # no world there: dense ids
    import_file(write_raw_id_log(tmp_path / "log.csv", "text"), settings.world_dir(), RAW_MAPPING)
    ids = serving_app.service_from_settings(settings, CONFIG).ids
    assert ids is not None and ids.item.dense_ids(["ad-8"]).tolist() == [8]


def test_the_schema_says_which_ids_are_accepted(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    user_id = schemas["RankRequest"]["properties"]["user_id"]["anyOf"]
    assert {"type": "integer", "minimum": -(2**63), "exclusiveMaximum": 2**63} in user_id
    assert {"type": "string", "minLength": 1, "maxLength": 256} in user_id
