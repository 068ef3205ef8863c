"""``solaris store init|stats|expire``: the feature store named by SOLARIS_STORE_CONN_ID or SOLARIS_STORE_URL."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from solaris.store import FeatureStore


def _time(value: str) -> datetime:
    """An ISO time; one without an offset is taken as UTC, the project's only time zone."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an ISO time like 2026-03-01T12:00:00Z") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def add_parser(sub: argparse._SubParsersAction) -> None:
    store = sub.add_parser("store", help="create, inspect or expire the feature store")
    ssub = store.add_subparsers(dest="store_command", required=True, metavar="ACTION")

    init = ssub.add_parser("init", help="create the store's tables if missing")
    init.set_defaults(handler=init_store)

    stats = ssub.add_parser("stats", help="rows, freshness and rows expiring within the hour, per table")
    stats.add_argument("--version", required=True, help="embedding version id, e.g. fm3-ae2-d32")
    stats.add_argument("--at", type=_time, help="the time freshness is judged at (default: now)")
    stats.set_defaults(handler=show_stats)

    expire = ssub.add_parser("expire", help="delete everything expired as of --at")
    expire.add_argument("--at", type=_time, required=True, help="the logical time, e.g. the run's interval end")
    expire.add_argument("--batch-size", type=int, default=10_000)
    expire.set_defaults(handler=expire_store)


def init_store(args: argparse.Namespace) -> int:
    from solaris.config import get_settings
    from solaris.store import open_configured_store

    settings = get_settings()
    with open_configured_store(settings, init=True):
        print(json.dumps({"initialised": settings.store_conn_id or settings.store_url}))
    return 0


@contextmanager
def _initialised_store() -> Iterator[FeatureStore]:
    """The configured store; a database error (no tables yet, no server) becomes one line that names it."""
    from sqlalchemy import make_url
    from sqlalchemy.exc import DBAPIError

    from solaris.config import get_settings
    from solaris.store import open_configured_store

    settings = get_settings()
    try:
        with open_configured_store(settings) as store:
            store.check_initialised()
            yield store
    except DBAPIError as exc:
        where = settings.store_conn_id or make_url(settings.store_url).render_as_string(hide_password=True)
        raise ValueError(
            f"the store {where} cannot answer ({' '.join(str(exc.orig).split())}): is it reachable, and were its "
            "tables created (`solaris store init`)?"
        ) from None


def show_stats(args: argparse.Namespace) -> int:
    at = args.at or datetime.now(UTC)  # an inspection command: "now" is its input, read here at the edge
    with _initialised_store() as store:
        store.get_embedding_version(args.version)
        stats = store.stats(args.version, at)
    report = {table: asdict(s) | {"fresh_share": round(s.fresh_share, 4)} for table, s in stats.items()}
    print(json.dumps({"version": args.version, "at": at.isoformat(), "tables": report}, indent=2, default=str))
    return 0


def expire_store(args: argparse.Namespace) -> int:
    with _initialised_store() as store:
        counts = store.expire(args.at, batch_size=args.batch_size)
    print(json.dumps({"at": args.at.isoformat(), "deleted": counts}))
    return 0
