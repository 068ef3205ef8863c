"""The champion VM of the session's tiny world, and a store laid out so each candidate has a known tier."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from precompute_env import LEAD
from tcp_proxy import TcpProxy

from solaris.config import Settings
from solaris.embedding_version import parse_embedding_version
from solaris.serving import Ranker
from solaris.serving.app import Service
from solaris.serving.champion import ServingModel, load_serving_model
from solaris.store import FeatureStore, PostgresStoreConfig, open_store
from solaris.tracking import registry
from solaris.training.jobs import TrainReport, World

T = datetime(2026, 3, 1, 12, tzinfo=UTC)
StoreFactory = Callable[[], FeatureStore]
TTL = timedelta(hours=2)


def assert_refused_naming(client: TestClient, body: dict[str, object], field: str, message: str) -> None:
    """/rank answers a request outside its limits 422, naming the field and what is wrong with it."""
    answer = client.post("/rank", json=body)
    assert answer.status_code == 422
    detail = str(answer.json()["detail"])
    assert field in detail and message in detail


def one_vm(ranker: Ranker, poll_seconds: float = 30.0) -> Service:
    """A service of one in-process ranker, serving the lead VM."""
    return Service({LEAD.name: ranker}, {}, poll_seconds)


@pytest.fixture(scope="session")
def champion(trained: tuple[Settings, World, TrainReport]) -> ServingModel:
    client = registry.connect(trained[0])
    return load_serving_model(client, LEAD.name, registry.resolve_champions(client, LEAD.name).vm)


@dataclass(frozen=True)
class Layout:
    """User 1 has a pair row for item 10 and an aggregate; user 2 has no aggregate but neighbour 3, who has
    a pair row for item 20; item 30 of user 2 is nobody's. ``vectors`` are what was written."""

    store: FeatureStore
    version: str
    vectors: dict[str, np.ndarray]


def codes(n: int, dim: int, seed: int) -> np.ndarray:
    """Codes exactly representable in float16 (the store's dtype), so round trips compare exactly."""
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float16).astype(np.float32)


def lay_out(store: FeatureStore, model: ServingModel, created: datetime = T - timedelta(minutes=30)) -> Layout:
    fm, ae, dim, _ = parse_embedding_version(model.pinned.embedding_version)
    version = store.register_embedding_version(fm, ae, dim, created_at=created)
    vectors = {"pair": codes(1, dim, 1), "agg": codes(1, dim, 2), "neighbour_pair": codes(1, dim, 3)}
    expires = created + TTL
    pairs = np.vstack([vectors["pair"], vectors["neighbour_pair"]])
    store.write_pair_embeddings(
        "r1", version, np.array([1, 3]), np.array([10, 20]), pairs, np.ones(2), created, expires
    )
    store.write_user_aggregates("r1", version, np.array([1]), vectors["agg"], np.array([5]), 24, created, expires)
    store.write_user_neighbours(
        "r1", version, np.array([2]), np.array([[3, -1]]), np.array([[0.9, 0.0]]), created, expires
    )
    return Layout(store, version, vectors)


@pytest.fixture
def layout(make_store: StoreFactory, champion: ServingModel) -> Layout:
    return lay_out(make_store(), champion)


@pytest.fixture
def proxied_store_url(pg_url: str, champion: ServingModel) -> Iterator[tuple[str, TcpProxy]]:
    """A laid-out PostgreSQL store reached through a proxy the test can cut: its URL (through the proxy, with
    its schema) and the proxy."""
    url = sa.make_url(pg_url)
    proxy = TcpProxy(url.port or 5432)
    schema = f"proxy_{uuid.uuid4().hex[:10]}"
    through = url.set(port=proxy.port).render_as_string(False)
    with open_store(PostgresStoreConfig(through, schema=schema), init=True) as store:
        lay_out(store, champion)
    yield f"{through}?schema={schema}", proxy
    proxy.close()
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    engine.dispose()


@pytest.fixture
def proxied(proxied_store_url: tuple[str, TcpProxy], champion: ServingModel) -> Iterator[tuple[Ranker, TcpProxy]]:
    """The proxied store's ranker, with a 0.5 s timeout."""
    url, proxy = proxied_store_url
    store = open_store(url)
    ranker = Ranker(store, champion, store_timeout_s=0.5)
    yield ranker, proxy
    ranker.close()
    store.close()
