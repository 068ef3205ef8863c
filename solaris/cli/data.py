"""``solaris data generate|import|summary|ids|live``."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from solaris.precompute.params import cli_option

if TYPE_CHECKING:
    from solaris.config import Settings
    from solaris.data.eventlog import EventLog

MOVIELENS = "movielens-100k"
MAPPING_FLAGS = (
    "format",
    "user",
    "item",
    "timestamp",
    "label",
    "rating",
    "rating_threshold",
    "request_id",
    "conversion",
    "user_feature",
    "item_feature",
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    data = sub.add_parser("data", help="generate, import or inspect event logs")
    dsub = data.add_subparsers(dest="data_command", required=True, metavar="ACTION")

    gen = dsub.add_parser("generate", help="generate a synthetic ads world")
    gen.add_argument("--preset", default="default", help="tiny|default|churn|plain|large")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--name", help="world name under $SOLARIS_DATA_DIR/worlds (default: SOLARIS_WORLD)")
    gen.add_argument("--overwrite", action="store_true")
    sizes = gen.add_argument_group("sizes (override the preset)")
    sizes.add_argument("--users", type=int, help="number of users")
    sizes.add_argument("--items", type=int, help="number of items")
    sizes.add_argument("--days", type=int, help="days of traffic")
    sizes.add_argument("--requests-per-user-day", type=float, help="mean requests per signed-up user and day")
    sizes.add_argument("--candidates", type=int, help="candidates per request")
    sizes.add_argument("--shown", type=int, help="impressions per request")
    sizes.add_argument("--pool-size", type=int, help="items in each user's daily retrieval pool")
    sizes.add_argument("--start", help="first hour, ISO-8601 with a UTC offset (default 2026-01-05T00:00Z)")
    gen.add_argument(
        "--hours",
        type=int,
        metavar="N",
        help="write only the first N hours of the world's span; `solaris data live` writes the rest as time passes",
    )
    gen.set_defaults(handler=generate)

    imp = dsub.add_parser("import", help="import a CSV/Parquet interaction log, or MovieLens-100K")
    imp.add_argument("source", metavar="SOURCE", help=f"a .csv or .parquet file, or {MOVIELENS}")
    imp.add_argument("--name", required=True, help="log name under $SOLARIS_DATA_DIR/worlds")
    imp.add_argument("--format", choices=("csv", "parquet"), help="default: from the file's suffix")
    imp.add_argument("--user", help="user id column")
    imp.add_argument("--item", help="item id column")
    imp.add_argument("--timestamp", help="time column: unix seconds or ISO-8601 (naive means UTC)")
    imp.add_argument("--label", help="click column, 0/1")
    imp.add_argument("--rating", help="rating column; a rating >= --rating-threshold is a click")
    imp.add_argument("--rating-threshold", type=float)
    imp.add_argument("--request-id", help="request id column (default: one request per user per hour)")
    imp.add_argument("--conversion", help="conversion column, 0/1 (default: all 0)")
    imp.add_argument("--user-feature", action="append", default=[], help="categorical user column (repeatable)")
    imp.add_argument("--item-feature", action="append", default=[], help="categorical item column (repeatable)")
    imp.add_argument(
        "--on-duplicate",
        choices=("drop", "error"),
        default="drop",
        help="an item twice in one request (one user-hour without --request-id)",
    )
    imp.add_argument(
        "--session-gap-minutes",
        type=float,
        metavar="N",
        help="without --request-id: a gap of more than N minutes between a user's consecutive events starts a "
        "new request (still within one hour), so an item shown again after a pause is kept, not a duplicate "
        "(default: no sessions, one request per user-hour)",
    )
    imp.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        metavar="FACTOR",
        help="compress time: each hour of the log holds FACTOR hours of the source (e.g. 24 for MovieLens)",
    )
    imp.add_argument("--wheel", help=f"{MOVIELENS} only: an offline copy of the RecBole 1.2.1 wheel")
    imp.add_argument("--overwrite", action="store_true")
    imp.set_defaults(handler=import_log)

    summ = dsub.add_parser("summary", help="print an event log's summary")
    summ.add_argument("--name", help="world name (default: SOLARIS_WORLD)")
    summ.set_defaults(handler=summary)

    prof = dsub.add_parser("profile", help="what an event log can support: known users, new ids, repeats, ceilings")
    prof.add_argument("world", help="a world name under $SOLARIS_DATA_DIR/worlds, or a folder path (anything with a /)")
    prof.add_argument(
        "--json",
        type=Path,
        metavar="PATH",
        help="write the profile's JSON here (default: $SOLARIS_DATA_DIR/profiles/<world>.json; the path is printed)",
    )
    flag, options = cli_option("ttl_hours")
    prof.add_argument(flag, **options)
    prof.set_defaults(handler=profile)

    ids = dsub.add_parser("ids", help="an imported world's id both ways: raw (as its log had it) and dense (models')")
    ids.add_argument("--name", help="world name (default: SOLARIS_WORLD)")
    which = ids.add_mutually_exclusive_group(required=True)
    which.add_argument("--user", metavar="ID", help="a user id (raw; dense with --dense)")
    which.add_argument("--item", metavar="ID", help="an item id (raw; dense with --dense)")
    ids.add_argument("--dense", action="store_true", help="ID is a dense id: show its raw id")
    ids.set_defaults(handler=show_id)

    live = dsub.add_parser("live", help="continue a generated world hour by hour on the live clock")
    live.add_argument("--name", help="world name (default: SOLARIS_WORLD)")
    live.add_argument(
        "--hour-seconds",
        type=float,
        default=3600.0,
        metavar="N",
        help="wall seconds per simulated hour (default 3600: real time); ignored when SOLARIS_LIVE_CLOCK is set",
    )
    live.add_argument(
        "--ranker",
        metavar="URL",
        help="send each hour's requests to this ranker, paced by the clock; each hour's figures go to "
        "$SOLARIS_DATA_DIR/live/load.jsonl and MLflow (experiment solaris-live)",
    )
    live.add_argument(
        "--heartbeat", type=Path, help="a file touched each time the loop looks at the clock (the stack's health check)"
    )
    live.set_defaults(handler=run_live_traffic)


def generate(args: argparse.Namespace) -> int:
    from solaris.config import get_settings
    from solaris.data.synthetic import generate_world, preset

    config = (
        preset(args.preset)
        .with_seed(args.seed)
        .with_overrides(
            n_users=args.users,
            n_items=args.items,
            days=args.days,
            requests_per_user_day=args.requests_per_user_day,
            n_candidates=args.candidates,
            n_shown=args.shown,
            pool_size=args.pool_size,
            start=_parse_start(args.start),
        )
    )
    settings = get_settings()
    log = generate_world(
        config, settings.world_dir(args.name), overwrite=args.overwrite, progress=True, hours=args.hours
    )
    print(json.dumps(log.summary(), indent=2))
    return 0


def run_live_traffic(args: argparse.Namespace) -> int:
    """Write each hour of the world as the clock passes it, until interrupted or at the world's horizon. The
    clock is ``SOLARIS_LIVE_CLOCK`` when set (the one the DAGs are scheduled on), else one starting now at
    the log's end; it is printed so other processes can be started on it."""
    import signal
    import threading

    from solaris.config import get_settings
    from solaris.live.clock import CLOCK_ENV, LiveClock, check_hour_seconds
    from solaris.live.figures import MlflowHours, append_hour, hour_line, load_log_path
    from solaris.live.load import LoadStats
    from solaris.live.traffic import LiveWorld, run_with_load

    shared = LiveClock.from_env()
    if shared is None:
        check_hour_seconds(args.hour_seconds)
    settings = get_settings()
    world = LiveWorld(settings.world_dir(args.name))
    clock = shared or LiveClock(world.end, datetime.now(UTC), args.hour_seconds)
    print(f"{CLOCK_ENV}='{clock.to_json()}'", flush=True)
    stop, totals = threading.Event(), LoadStats()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    hours_log, mlflow_hours = load_log_path(settings.data_dir), MlflowHours(settings)

    def wrote(hour: datetime) -> None:
        print(f"wrote {hour.isoformat()}", flush=True)

    def sent(hour: datetime, stats: LoadStats) -> None:
        line = hour_line(hour, stats)
        append_hour(hours_log, line)
        mlflow_hours.log(line)
        print(f"sent {json.dumps(line)}", flush=True)

    tick = (lambda: None) if args.heartbeat is None else args.heartbeat.touch
    try:
        run_with_load(world, clock, stop, args.ranker, totals, on_hour=wrote, on_tick=tick, on_sent=sent)
    finally:
        mlflow_hours.close()
    load = (
        f"; requests sent {totals.sent}: {totals.answered} ranked, {totals.not_ready} not ready, {totals.failed} failed"
    )
    print(
        f"stopped at {world.end.isoformat()} (horizon {world.horizon.isoformat()}){load if args.ranker else ''}",
        flush=True,
    )
    return 0


def _parse_start(raw: str | None) -> datetime | None:
    if raw is None:
        return None
    try:
        start = datetime.fromisoformat(raw)
    except ValueError:
        raise ValueError(f"--start {raw!r} is not an ISO-8601 time (e.g. 2026-01-05T00:00Z)") from None
    if start.tzinfo is None:
        raise ValueError(f"--start {raw!r} has no UTC offset; add Z or +00:00")
    return start.astimezone(UTC)


def import_log(args: argparse.Namespace) -> int:
    from solaris.config import get_settings
    from solaris.data.importer import DuplicateRowsWarning

    if not args.name or "/" in args.name or args.name.startswith("."):
        raise ValueError(f"--name {args.name!r} must be a plain folder name")
    settings = get_settings()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DuplicateRowsWarning)
        if args.source == MOVIELENS:
            log = _import_movielens(args, settings)
        else:
            log = _import_file(args, settings.world_dir(args.name))
    for warning in caught:
        print(f"solaris: warning: {warning.message}", file=sys.stderr)
    print(json.dumps(log.summary(), indent=2))
    return 0


def _import_movielens(args: argparse.Namespace, settings: Settings) -> EventLog:
    from solaris.data.movielens import import_movielens_100k

    mapped = [f"--{flag.replace('_', '-')}" for flag in MAPPING_FLAGS if getattr(args, flag) not in (None, [])]
    if mapped:
        raise ValueError(f"{MOVIELENS} has a fixed column mapping; drop {', '.join(mapped)}")
    if args.session_gap_minutes is not None:
        raise ValueError(f"{MOVIELENS} has fixed requests (user-hours); drop --session-gap-minutes")
    return import_movielens_100k(
        settings.world_dir(args.name),
        cache_dir=settings.data_dir / "cache" / "wheels",
        wheel=args.wheel,
        name=args.name,
        time_scale=args.time_scale,
        overwrite=args.overwrite,
    )


def _import_file(args: argparse.Namespace, target: Path) -> EventLog:
    from solaris.data.importer import ColumnMapping, import_file

    if args.wheel:
        raise ValueError(f"--wheel applies to {MOVIELENS} only")
    missing = [f"--{flag}" for flag in ("user", "item", "timestamp") if not getattr(args, flag)]
    if missing:
        raise ValueError(f"importing {args.source} needs {', '.join(missing)}")
    mapping = ColumnMapping(
        user=args.user,
        item=args.item,
        timestamp=args.timestamp,
        label=args.label,
        rating=args.rating,
        rating_threshold=args.rating_threshold,
        request_id=args.request_id,
        conversion=args.conversion,
        user_features=tuple(args.user_feature),
        item_features=tuple(args.item_feature),
    )
    return import_file(
        Path(args.source),
        target,
        mapping,
        fmt=args.format,
        name=args.name,
        on_duplicate=args.on_duplicate,
        time_scale=args.time_scale,
        session_gap_minutes=args.session_gap_minutes,
        overwrite=args.overwrite,
    )


def summary(args: argparse.Namespace) -> int:
    from solaris.config import get_settings
    from solaris.data.eventlog import EventLog

    print(json.dumps(EventLog(get_settings().world_dir(args.name)).summary(), indent=2))
    return 0


def profile(args: argparse.Namespace) -> int:
    """Print the log's profile and write it as JSON (:mod:`solaris.eval.profile`)."""
    from solaris.config import get_settings
    from solaris.data.eventlog import EventLog
    from solaris.eval.profile import profile_log
    from solaris.eval.profile_table import render
    from solaris.precompute.params import PrecomputeParams

    settings = get_settings()
    params = PrecomputeParams(ttl_hours=args.ttl_hours)
    log = EventLog(_world_folder(args.world, settings))
    figures = profile_log(log, params)
    target = args.json or settings.data_dir / "profiles" / f"{log.root.name}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(figures, indent=2) + "\n")
    print(render(figures))
    print(f"\nwrote {target}")
    return 0


def _world_folder(world: str, settings: Settings) -> Path:
    """A name is looked up under the worlds folder; anything with a path separator is a folder as given."""
    if "/" in world or world in (".", ".."):
        return Path(world)
    folder = settings.world_dir(world)
    if not folder.is_dir():
        names = sorted(p.name for p in settings.worlds_dir.glob("*") if p.is_dir() and not p.name.startswith("."))
        there = f"worlds there: {', '.join(names)}" if names else "none there"
        raise FileNotFoundError(f"no world {world!r} under {settings.worlds_dir} ({there}); pass a name or a folder")
    return folder


def show_id(args: argparse.Namespace) -> int:
    """One id both ways, as JSON; an id the world's map lacks is an error naming the world."""
    from solaris.config import get_settings
    from solaris.data.eventlog import EventLog
    from solaris.data.idmap import UNKNOWN, IdMaps

    log = EventLog(get_settings().world_dir(args.name))
    world = log.meta.get("name", log.root.name)  # meta: a folder holding no log is refused, named
    maps = IdMaps.read(log.root)
    if maps is None:
        raise ValueError(f"world {world} has no id map: its ids are used as they are (a generated world)")
    role, value = ("user", args.user) if args.user is not None else ("item", args.item)
    id_map = getattr(maps, role)
    if args.dense:
        try:
            dense = int(value)
        except ValueError:
            raise ValueError(f"--dense: {role} id {value!r} is not an integer") from None
        try:
            raw = id_map.raw_ids([dense])[0]
        except ValueError as exc:
            raise ValueError(f"world {world}, {role}s: {exc}") from None
    else:
        raw, dense = value, int(id_map.dense_ids([value])[0])
        if dense == UNKNOWN:
            raise ValueError(f"world {world} has no {role} {value!r} in its id map ({len(id_map)} {role}s)")
    print(json.dumps({role: {"raw": raw, "dense": dense}}))
    return 0
