"""The ranker as an HTTP service (FastAPI): POST /rank, GET /healthz, /readyz, /metrics.

One process serves every configured VM (:mod:`solaris.vms`): a request names its ``vm`` (default: the lead,
the first configured), each VM follows its own ``@champion`` and logs its own features as served, and
/metrics labels each series by VM. All of them read the one feature-store table.

Limits are part of the schema (:mod:`.schema`), so a request outside them is a 422 naming the field, and the OpenAPI
document says exactly what is accepted. A 422 echoes at most a short prefix of what was sent, readable as
JSON whatever it was (NaN, 1e400, a lone surrogate); a body over ``max_body_bytes`` is a 413 before it is
parsed. /metrics counts every answer by endpoint and status code, the 413s and 500s included.

Unknown users and items are valid: they take the cold path (the VM's learned defaults, tier none). A store
failure is never an error for the caller: the answer comes with tier none and ``store`` saying why. A store
that does not hold the champion's embedding version yet (a new stack) is one too: /readyz says ``degraded``
with the reason, /metrics sets ``solaris_ranker_degraded``, and the poll upgrades the VM once the version
appears. Only a store that holds the version with another dimension or dtype refuses the champion.

Ids are those of the world served (``SOLARIS_WORLD``): an imported world's raw ids (text or any int64, mapped
to dense ids through its id map, loaded once at start; one the map lacks is unknown), else a generated world's
dense ids as they are. The answer echoes the ids as sent.
"""

import functools
import json
import logging
import os
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch
from fastapi import FastAPI, HTTPException, Response
from fastapi.exceptions import RequestValidationError
from prometheus_client import CONTENT_TYPE_LATEST
from threadpoolctl import threadpool_limits

from solaris.config import Settings
from solaris.data.idmap import IdMaps
from solaris.embedding_version import parse_embedding_version
from solaris.logs import configure_logging
from solaris.serving.champion import ChampionWatcher, ServingModel
from solaris.serving.guards import MAX_BODY_BYTES, BodyLimit, ResponseCounter, validation_failed
from solaris.serving.metrics import VERSION_MISSING, RankerMetrics
from solaris.serving.ranker import NotReady, Ranker
from solaris.serving.schema import RankResponse, rank_request_model
from solaris.serving.servedlog import ServedLog, served_dir
from solaris.store import FeatureStore, StoreError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServiceConfig:
    max_candidates: int = 1000
    store_timeout_ms: float = 50.0
    poll_seconds: float = 30.0
    served_log_dir: Path | None = None  # one dataset per VM under it (servedlog.served_dir); None: not logged
    served_log_flush_rows: int = 100_000  # the served log writes a part file per this many rows (and at stop)
    torch_threads: int = 1
    max_body_bytes: int = MAX_BODY_BYTES  # larger request bodies are answered 413 unread

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=str)

    @classmethod
    def from_json(cls, text: str) -> "ServiceConfig":
        values = json.loads(text)
        folder = values.pop("served_log_dir")
        return cls(**values, served_log_dir=None if folder is None else Path(folder))

    def __post_init__(self) -> None:
        values = (
            self.max_candidates,
            self.store_timeout_ms,
            self.poll_seconds,
            self.torch_threads,
            self.max_body_bytes,
            self.served_log_flush_rows,
        )
        if min(values) <= 0:
            raise ValueError(
                "max_candidates, store_timeout_ms, poll_seconds, torch_threads, max_body_bytes and"
                " served_log_flush_rows must be positive"
            )


class Service:
    """What the app holds while it runs: a ranker per VM (the lead first), their champion watchers and one
    poller that refreshes each."""

    def __init__(
        self,
        rankers: Mapping[str, Ranker],
        watchers: Mapping[str, ChampionWatcher],
        poll_seconds: float,
        ids: IdMaps | None = None,
    ) -> None:
        if not rankers:
            raise ValueError("a service needs at least one VM to serve")
        self.rankers, self.watchers = dict(rankers), dict(watchers)
        self.ids = ids  # the served world's id map; None: requests carry dense ids
        self.metrics = next(iter(self.rankers.values())).metrics
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, args=(poll_seconds,), name="champion-poll", daemon=True)

    @property
    def vms(self) -> tuple[str, ...]:
        return tuple(self.rankers)

    def ranker(self, vm: str | None) -> Ranker:
        return self.rankers[vm or self.vms[0]]

    def dense_ids(self, user: int | str, items: list[int] | list[str]) -> tuple[int, np.ndarray]:
        """A request's ids as the models know them: through the world's map (one it lacks is unknown, served
        cold), or as sent where the world has none."""
        if self.ids is None:
            return int(user), np.asarray(items, np.int64)
        return int(self.ids.user.dense_ids([user])[0]), self.ids.item.dense_ids(items)

    def start(self) -> None:
        for watcher in self.watchers.values():
            watcher.refresh(wait=True)
        self.check_stores()
        self._poller.start()

    def check_stores(self) -> None:
        """Each ranker asks the store for its served embedding version; the degraded gauge follows."""
        for vm, ranker in self.rankers.items():
            ranker.check_store()
            self.metrics.degraded.labels(vm, VERSION_MISSING).set(ranker.degraded is not None)

    def _poll(self, seconds: float) -> None:
        wait, ready = seconds, True
        while True:
            wait, ready = next_poll_wait(seconds, wait, ready, self._serving_all())
            if self._stop.wait(wait):
                return
            for watcher in self.watchers.values():
                watcher.refresh(wait=True)
            self.check_stores()

    def _serving_all(self) -> bool:
        """Every VM has a champion and reads the store: otherwise the poll looks again soon."""
        loaded = all(watcher.current is not None for watcher in self.watchers.values())
        return loaded and not any(ranker.degraded for ranker in self.rankers.values())

    def stop(self) -> None:
        self._stop.set()
        for ranker in self.rankers.values():
            ranker.close()


# A VM with nothing to serve looks again after this share of the poll, doubling back up to the poll: on a new
# stack the store's first precompute lands seconds after the ranker refused its champion, and the ranker
# should not answer 503 for a whole poll after it; a champion that stays refused is not reloaded in a loop.
NOT_READY_POLL_SHARE = 0.1


def next_poll_wait(poll_seconds: float, last_wait: float, was_ready: bool, ready: bool) -> tuple[float, bool]:
    """Seconds until the next refresh, and ``ready`` to pass back: the poll while every VM serves, else a short
    wait that doubles at each refresh that leaves a VM with nothing to serve."""
    if ready:
        return poll_seconds, True
    if was_ready:
        return poll_seconds * NOT_READY_POLL_SHARE, False
    return min(2 * last_wait, poll_seconds), False


def build_service(
    store: FeatureStore,
    models: Mapping[str, ChampionWatcher | ServingModel],
    config: ServiceConfig,
    ids: IdMaps | None = None,
) -> Service:
    """The service's parts, one ranker per VM on the shared store and metrics. The VMs run on one torch thread:
    at 200 rows a second thread saves nothing and costs tens of milliseconds at p99 when the cores are busy
    (bench_serving). numpy's BLAS (the VM's numpy forward, the tier combination) is held to as many threads."""
    torch.set_num_threads(config.torch_threads)
    threadpool_limits(config.torch_threads, user_api="blas")
    metrics = RankerMetrics(tuple(models))
    rankers = {}
    for vm, source in models.items():
        log = None
        if config.served_log_dir is not None:
            log = ServedLog(
                served_dir(config.served_log_dir, vm),
                flush_rows=config.served_log_flush_rows,
                on_drop=lambda rows: metrics.served_log_dropped.inc(rows),
                on_failure=lambda error: _served_log_failed(metrics, error),
                child_process=True,
            )
        if isinstance(source, ChampionWatcher):
            source.on_failure = lambda stage, vm=vm: metrics.champion_failures.labels(vm, stage).inc()
            source.check = functools.partial(_fits_store, store)
        rankers[vm] = Ranker(store, source, log, store_timeout_s=config.store_timeout_ms / 1000, metrics=metrics)
    watchers = {vm: source for vm, source in models.items() if isinstance(source, ChampionWatcher)}
    return Service(rankers, watchers, config.poll_seconds, ids)


def _fits_store(store: FeatureStore, model: ServingModel) -> None:
    """Refuse a VM whose embedding version the store holds with another dimension or dtype: its codes would be
    read into the wrong shape. A version the store lacks is served tier none until it appears
    (:meth:`Ranker.check_store`)."""
    version = model.pinned.embedding_version
    try:
        held = store.get_embedding_version(version)
    except StoreError:
        return
    expected = parse_embedding_version(version)
    if (held.dim, held.dtype) != (expected.dim, expected.dtype):
        raise ValueError(
            f"{model.pinned.vm_model} version {model.pinned.vm} reads embedding version {version} as dim"
            f" {expected.dim} {expected.dtype}, but the feature store holds it as dim {held.dim} {held.dtype}"
        )


def _served_log_failed(metrics: RankerMetrics, error: str) -> None:
    metrics.served_log_write_failures.inc()
    logger.error("the served log failed to write rows: %s", error)


def service_from_settings(settings: Settings, config: ServiceConfig) -> Service:
    """The configured store and every configured VM's ``solaris-vm-<name>@champion``, each followed as it moves,
    with the id map of the world served (``SOLARIS_WORLD``), if it has one."""
    from solaris.store import open_configured_store
    from solaris.tracking import registry

    ids = IdMaps.read(settings.world_dir())
    logger.info("world %s: %s", settings.world, "raw ids through its id map" if ids else "no id map, dense ids")
    client = registry.connect(settings)
    watchers = {spec.name: ChampionWatcher(client, spec.name) for spec in settings.vms()}
    return build_service(open_configured_store(settings), watchers, config, ids)


CONFIG_ENV = "SOLARIS_SERVE_CONFIG"


def app_from_env() -> FastAPI:
    """uvicorn's factory in each worker process: settings from ``SOLARIS_*``, the config from the CLI."""
    from solaris.config import get_settings

    # The solaris loggers write to stderr themselves: a library's logging.basicConfig (importing mlflow.pytorch
    # runs one at level ERROR) would otherwise drop every warning (a champion that cannot load).
    configure_logging()
    config = ServiceConfig.from_json(os.environ[CONFIG_ENV])
    return create_app(service_from_settings(get_settings(), config), config)


def create_app(service: Service, config: ServiceConfig) -> FastAPI:
    # Evaluated annotations (no `from __future__ import annotations` here): FastAPI reads the endpoint's
    # parameter types at runtime, and this request model is built per app, with its limits.
    RankRequest = rank_request_model(config.max_candidates, service.vms, raw_ids=service.ids is not None)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service.start()
        yield
        service.stop()

    app = FastAPI(
        title="SOLARIS ranker",
        version="1",
        lifespan=lifespan,
        exception_handlers={RequestValidationError: validation_failed},
    )

    # The answer is built as a RankResponse (the schema documents it) and sent as its JSON: FastAPI would
    # otherwise validate it a second time, ~10% of a request's interpreter time. The endpoint is async and
    # scores on the event loop (about a millisecond of VM): a sync endpoint would run on AnyIO's thread pool
    # and hand the read to a second thread, and each handoff between threads that want the GIL can wait out
    # the interpreter's switch interval (5 ms) at the tail.
    @app.post(
        "/rank",
        response_model=RankResponse,
        responses={
            400: {"description": "a body that cannot be decoded: not UTF-8, or nested too deeply"},
            413: {"description": f"request body over {config.max_body_bytes} bytes"},
            503: {"description": "the VM has no champion loaded yet"},
        },
    )
    async def rank(request: RankRequest) -> Response:  # type: ignore[valid-type]
        at = request.at or datetime.now(UTC)  # the HTTP edge is where "now" enters
        positions = None if request.positions is None else np.asarray(request.positions)
        ranker = service.ranker(request.vm)
        user, items = service.dense_ids(request.user_id, request.items)
        try:
            served = await ranker.rank_async(user, items, at, positions, request.request_id)
        except NotReady as exc:
            raise HTTPException(503, f"VM {request.vm or service.vms[0]}: {exc}") from None
        answer = RankResponse(
            user_id=request.user_id,
            vm=served.vm_name,
            vm_version=served.vm_version,
            embedding_version=served.embedding_version,
            scores=served.scores.tolist(),
            tiers=served.tier_names(),
            store=served.store_failure or "ok",
        )
        return Response(answer.model_dump_json(), media_type="application/json")

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", responses={503: {"description": "some VM has no champion loaded yet"}})
    def readyz() -> dict[str, object]:
        """Ready when every VM serves a champion, ``degraded`` (still 200) where one serves tier none for a reason
        named under ``degraded``; the lead's versions at the top level, every VM's under ``vms``."""
        serving, waiting = {}, []
        for vm, ranker in service.rankers.items():
            try:
                model = ranker.model
            except NotReady as exc:
                watcher = service.watchers.get(vm)
                waiting.append(
                    f"VM {vm}: {exc if watcher is None or watcher.last_error is None else watcher.last_error}"
                )
                continue
            serving[vm] = {"vm_version": model.pinned.vm, "embedding_version": model.pinned.embedding_version}
        if waiting:
            raise HTTPException(503, "; ".join(waiting))
        degraded = {vm: ranker.degraded for vm, ranker in service.rankers.items() if ranker.degraded}
        status = "degraded" if degraded else "ready"
        return {"status": status, **serving[service.vms[0]], "vms": serving, "degraded": degraded}

    @app.get("/metrics", response_class=Response)
    def metrics() -> Response:
        for vm, ranker in service.rankers.items():
            if ranker.served_log is not None:  # the writer's failures so far, even with no request since
                ranker.served_log.poll()
            try:
                model = ranker.model
                service.metrics.serving(vm, model.pinned.vm, model.pinned.embedding_version)
            except NotReady:
                pass
        return Response(service.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    # The last added runs first: the counter sees the limit's 413s.
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes)
    app.add_middleware(ResponseCounter, metrics=service.metrics, endpoints=frozenset(r.path for r in app.routes))
    return app
