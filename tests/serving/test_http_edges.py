"""The HTTP service at its edges (issue #17): numbers JSON cannot carry back (NaN, Infinity, 1e400), lone
surrogates and non-JSON bodies are a 422 that names the field and echoes a bounded prefix, never a 500; a body
over the limit is a 413 before it is parsed; /metrics counts responses by endpoint and status code."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import T, lay_out, one_vm
from fastapi import FastAPI
from fastapi.testclient import TestClient

from solaris.serving import Ranker
from solaris.serving.app import ServiceConfig, create_app
from solaris.serving.champion import ServingModel
from solaris.store import SqliteStoreConfig, open_store

CONFIG = ServiceConfig(max_candidates=50)
AT = T.isoformat()
MIB = 1 << 20
ECHO_CHARS = 200  # the most of any one input an error echoes


@pytest.fixture
def ranker(tmp_path: Path, champion: ServingModel) -> Iterator[Ranker]:
    layout = lay_out(open_store(SqliteStoreConfig(tmp_path / "store.db"), init=True), champion)
    ranker = Ranker(layout.store, champion, store_timeout_s=1.0)
    yield ranker
    layout.store.close()


def client_for(ranker: Ranker, config: ServiceConfig = CONFIG) -> TestClient:
    """Server errors come back as the 500 a caller would see, not as the exception."""
    return TestClient(create_app(one_vm(ranker, config.poll_seconds), config), raise_server_exceptions=False)


@pytest.fixture
def client(ranker: Ranker) -> Iterator[TestClient]:
    with client_for(ranker) as client:
        yield client


def post_raw(client: TestClient, body: bytes | str, content_type: str = "application/json"):  # noqa: ANN201
    return client.post("/rank", content=body, headers={"content-type": content_type})


def strings_in(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from strings_in(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from strings_in(v)


def assert_bounded_422(answer, field: str | int, message: str) -> list[dict]:  # noqa: ANN001
    assert answer.status_code == 422, answer.text[:500]
    text = answer.content.decode("utf-8")  # strict: a lone surrogate cannot have been encoded
    body = json.loads(text)
    errors = body["detail"]
    assert any(field in e["loc"] and message in e["msg"] for e in errors), errors
    for s in strings_in(body):
        s.encode("utf-8")  # no lone surrogate survives, not even as a \ud800 escape
    for e in errors:
        echoed = e.get("input")
        rendered = echoed if isinstance(echoed, str) else json.dumps(echoed, allow_nan=False)
        assert len(rendered) <= ECHO_CHARS + 1  # the prefix and an ellipsis
    assert len(answer.content) < 4096
    return errors


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ('{"user_id": NaN, "items": [3]}', "user_id", "must be a JSON integer"),
        ('{"user_id": Infinity, "items": [3]}', "user_id", "must be a JSON integer"),
        ('{"user_id": -Infinity, "items": [3]}', "user_id", "must be a JSON integer"),
        ('{"user_id": 1e400, "items": [3]}', "user_id", "must be a JSON integer"),
        ('{"user_id": 1, "items": [3, NaN]}', "items", "must be a JSON integer"),
        ('{"user_id": 1, "items": [3], "positions": [Infinity]}', "positions", "must be a JSON integer"),
        ('{"user_id": 1, "items": [3], "at": NaN}', "at", "datetime"),
        ('{"user_id": 1, "items": [3], "\\ud800": 1}', "body", "unable to parse raw data as a unicode string"),
        ('{"user_id": "\\ud800", "items": [3]}', "user_id", "must be a JSON integer"),
        ('{"user_id": 1, "items": [3], "at": "\\udfff2026"}', "at", "valid string"),
        ('{"user_id": 1, "items": [NaN, NaN], "positions": [0]}', "items", "must be a JSON integer"),
    ],
)
def test_numbers_and_text_json_cannot_echo_are_422_not_500(
    client: TestClient, body: str, field: str, message: str
) -> None:
    assert_bounded_422(post_raw(client, body), field, message)


def test_a_lone_surrogate_is_echoed_escaped(client: TestClient) -> None:
    errors = assert_bounded_422(post_raw(client, '{"user_id": "a\\ud800b", "items": [3]}'), "user_id", "JSON integer")
    assert any(e.get("input") == "a\\ud800b" for e in errors)  # a backslash, then "ud800": readable, valid UTF-8


def test_a_lone_surrogate_in_a_key_is_echoed_escaped(client: TestClient) -> None:
    """Pydantic cannot read the key as a string: the error is at the body, and the key is what it echoes."""
    body = '{"user_id": 1, "items": [3], "col\\udc80our": 1}'
    [error] = assert_bounded_422(post_raw(client, body), "body", "unicode string")
    assert error["input"] == "col\\udc80our"


def test_long_input_is_echoed_as_a_bounded_prefix(client: TestClient) -> None:
    answer = client.post("/rank", json={"user_id": "7" * 100_000, "items": [3]})
    [error] = assert_bounded_422(answer, "user_id", "JSON integer")
    assert error["input"] == "7" * ECHO_CHARS + "…"


@pytest.mark.parametrize(
    "body",
    [
        '{"user_id": 1, "items": [' + ", ".join(["NaN"] * 2000) + "]}",
        '{"user_id": 1, "items": [' + ", ".join(["NaN"] * 49) + "]}",
        '{"user_id": 1, "items": [3], ' + ", ".join(f'"k{i}": NaN' for i in range(20_000)) + "}",
    ],
)
def test_many_errors_are_one_bounded_answer(client: TestClient, body: str) -> None:
    """One error per bad item or unknown key: a 1 MiB body must not become a 20 MB answer."""
    answer = post_raw(client, body)
    assert answer.status_code == 422 and len(answer.content) < 4096
    errors = answer.json()["detail"]
    assert 1 <= len(errors) <= 11 and all(e["loc"][0] == "body" for e in errors)
    if len(errors) == 11:
        assert errors[-1]["type"] == "too_many_errors" and "more" in errors[-1]["msg"]


@pytest.mark.parametrize(
    ("body", "content_type", "message"),
    [
        (b'{"user_id": 1, "items": [3', "application/json", "not valid JSON"),
        (b"", "application/json", "Field required"),
        (b'{"user_id": 1, "items": [3]} trailing', "application/json", "not valid JSON"),
        (b"\xff\xfe\x00junk", "text/plain", "valid dictionary"),
        ('{"user_id": "\\ud800"}'.encode(), "text/plain", "valid dictionary"),
    ],
)
def test_bodies_that_are_not_json_are_4xx(client: TestClient, body: bytes, content_type: str, message: str) -> None:
    answer = post_raw(client, body, content_type)
    assert 400 <= answer.status_code < 500, answer.text[:500]
    assert message in answer.content.decode("utf-8") and len(answer.content) < 4096


def test_invalid_utf8_json_is_a_400(client: TestClient) -> None:
    answer = post_raw(client, b'{"user_id": 1, "items": [3], "k": "\xff"}')
    assert answer.status_code == 400 and len(answer.content) < 4096


def test_a_body_over_the_limit_is_a_413(client: TestClient) -> None:
    huge = json.dumps({"user_id": 1, "items": list(range(1_300_000))}).encode()  # ~12 MB, as in the issue
    answer = post_raw(client, huge)

    assert answer.status_code == 413 and len(answer.content) < 512
    assert str(MIB) in answer.json()["detail"]


def test_a_streamed_body_over_the_limit_is_a_413(client: TestClient) -> None:
    """No Content-Length (chunked): the bytes are counted as they arrive."""
    chunks = iter([b'{"user_id": 1, "items": [' + b"1, " * 30_000] * 16)
    answer = client.post("/rank", content=chunks, headers={"content-type": "application/json"})
    assert answer.status_code == 413


def test_a_body_at_the_limit_is_parsed(ranker: Ranker) -> None:
    config = ServiceConfig(max_candidates=50, max_body_bytes=1000)
    body = json.dumps({"user_id": 1, "items": [10], "at": AT}).encode()
    with client_for(ranker, config) as client:
        assert post_raw(client, body.ljust(1000)).status_code == 200
        assert post_raw(client, body.ljust(1001)).status_code == 413
        assert client.post("/rank", content=iter([body, b" " * (1001 - len(body))])).status_code == 413
        assert client.get("/healthz").status_code == 200


def test_a_declared_length_over_the_limit_is_refused_without_reading_the_body(ranker: Ranker) -> None:
    app = create_app(one_vm(ranker, CONFIG.poll_seconds), CONFIG)
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/rank",
        "raw_path": b"/rank",
        "query_string": b"",
        "root_path": "",
        "client": ("t", 1),
        "server": ("t", 80),
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(10 * MIB).encode())],
    }
    sent: list[dict] = []

    async def receive() -> dict:
        raise AssertionError("the body was read")

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 413


def test_config_rejects_a_non_positive_limit() -> None:
    with pytest.raises(ValueError, match="max_body_bytes"):
        ServiceConfig(max_body_bytes=0)
    assert ServiceConfig.from_json(ServiceConfig(max_body_bytes=4096).to_json()).max_body_bytes == 4096


def responses_counted(metrics: str) -> dict[tuple[str, str], float]:
    counted = {}
    for line in metrics.splitlines():
        if line.startswith("solaris_http_responses_total{"):
            labels, value = line.rsplit(" ", 1)
            pairs = dict(p.split("=", 1) for p in labels[labels.index("{") + 1 : -1].split(","))
            counted[(pairs["endpoint"].strip('"'), pairs["status"].strip('"'))] = float(value)
    return counted


def test_metrics_count_responses_by_endpoint_and_status(ranker: Ranker, monkeypatch: pytest.MonkeyPatch) -> None:
    with client_for(ranker) as client:
        assert client.post("/rank", json={"user_id": 1, "items": [10], "at": AT}).status_code == 200
        assert client.post("/rank", json={"user_id": 1, "items": [10], "at": AT}).status_code == 200
        assert client.post("/rank", json={"user_id": -1, "items": [10]}).status_code == 422
        assert post_raw(client, '{"user_id": NaN, "items": [3]}').status_code == 422
        assert post_raw(client, b" " * (MIB + 1)).status_code == 413
        assert client.get("/healthz").status_code == 200
        assert client.get("/no/such/path").status_code == 404
        assert client.get("/rank").status_code == 405

        async def broken(*args: object, **kwargs: object) -> None:
            raise RuntimeError("a bug in the ranker")

        monkeypatch.setattr(ranker, "rank_async", broken)
        assert client.post("/rank", json={"user_id": 1, "items": [10], "at": AT}).status_code == 500
        first = client.get("/metrics")
        counted = responses_counted(client.get("/metrics").text)

    assert first.status_code == 200 and "# TYPE solaris_http_responses_total counter" in first.text
    assert counted == {
        ("/rank", "200"): 2.0,
        ("/rank", "422"): 2.0,
        ("/rank", "413"): 1.0,
        ("/rank", "405"): 1.0,
        ("/rank", "500"): 1.0,
        ("/healthz", "200"): 1.0,
        ("other", "404"): 1.0,  # unknown paths share one label: a scanner cannot grow the series
        ("/metrics", "200"): 1.0,  # the scrape before this one
    }


def test_every_route_is_an_endpoint_label(ranker: Ranker) -> None:
    app: FastAPI = create_app(one_vm(ranker, CONFIG.poll_seconds), CONFIG)
    with TestClient(app) as client:
        client.get("/openapi.json")
        client.get("/readyz")
        counted = responses_counted(client.get("/metrics").text)
    assert counted == {("/openapi.json", "200"): 1.0, ("/readyz", "200"): 1.0}
