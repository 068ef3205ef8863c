"""The profile (:mod:`solaris.eval.profile`) as the text `solaris data profile` prints."""

from __future__ import annotations

from typing import Any

DASH = "-"
DAY_COLUMNS = (
    ("users_known", "users known"),
    ("items_not_in_train_span", "items not in train span"),
    ("items_not_seen_before_day", "items not seen before day"),
    ("users_not_in_train_span", "users not in train span"),
    ("users_not_seen_before_day", "users not seen before day"),
)


def render(profile: dict[str, Any]) -> str:
    span = profile["span"]
    lines = [
        f"{profile['world']} ({profile['root']}): {span['start']} to {span['end']}, {span['hours']:,} hours, "
        f"{profile['impressions']:,} impressions",
        f"replay spans: {_spans(profile['replay_spans'])}",
        "",
        f"users known before their hour (a request or a sign-up before it): {pct(profile['users_known'])} of impressions",
        "",
        *_days(profile["by_day"]),
        "",
        "side features:",
        *(f"  {who}: {_features(profile['side_features'][who])}" for who in ("users", "items")),
        "",
        _requests(profile["requests_per_user_day"]),
        _repeat(profile["repeat_exposure"]),
        *_volume(profile["hourly_volume"]),
        "",
        *_ceilings(profile["ceilings"], profile["repeat_exposure"]["ttl_hours"]),
    ]
    return "\n".join(lines)


def pct(share: float | None) -> str:
    return DASH if share is None else f"{share:.1%}"


def _spans(spans: dict[str, str]) -> str:
    if "problem" in spans:
        return f"none ({spans['problem']}); the figures that need them are left out"
    return ", ".join(f"{name} {span}" for name, span in spans.items())


def _days(rows: list[dict[str, Any]]) -> list[str]:
    """One line a day: the FM of the first training span, and the one refreshed each day, never saw these."""
    widths = [len(title) for _, title in DAY_COLUMNS]
    header = f"{'day':<10}  {'impressions':>11}  " + "  ".join(title for _, title in DAY_COLUMNS)
    body = [
        f"{row['day']:<10}  {row['impressions']:>11,}  "
        + "  ".join(f"{pct(row[key]):>{w}}" for (key, _), w in zip(DAY_COLUMNS, widths, strict=True))
        for row in rows
    ]
    return ["by day (share of the day's impressions):", header, *body]


def _features(side: dict[str, Any]) -> str:
    features = ", ".join(f"{name} ({n:,} values)" for name, n in side["features"].items()) or "none"
    return f"{side['rows']:,} rows; {features}"


def _requests(stats: dict[str, float]) -> str:
    return (
        f"requests per user-day: mean {stats['mean']:.2f}, p50 {stats['p50']:g}, p90 {stats['p90']:g} "
        f"({stats['user_days']:,} user-days with a request)"
    )


def _repeat(repeat: dict[str, Any]) -> str:
    ttl = repeat["ttl_hours"]
    return (
        f"repeat exposure within {ttl} h: {pct(repeat['share'])} of impressions are of a pair the user was shown, "
        f"or had as a candidate, in the {ttl} hours before the impression's hour"
    )


def _volume(volume: dict[str, Any]) -> list[str]:
    return [
        f"hourly volume over {volume['hours']:,} hours, {pct(volume['empty_share'])} of them without a request:",
        *(
            f"  {name:<11} per hour: mean {volume[name]['mean']:,.1f}, p50 {volume[name]['p50']:,g}, "
            f"max {volume[name]['max']:,g}"
            for name in ("requests", "impressions")
        ),
    ]


def _ceilings(ceilings: dict[str, Any] | None, ttl_hours: int) -> list[str]:
    if ceilings is None:
        return ["ceilings: none (no replay spans)"]
    cohort = ceilings["cohort"]
    return [
        f"the most each tier could feed, evaluation span {ceilings['span']} ({ceilings['impressions']:,} impressions):",
        f"  user-keyed tiers (pair, A2A, aggregate, neighbours): {pct(ceilings['users_known'])} (users known)",
        f"  new-user cohort tier at {cohort['grid']}: {pct(cohort['share'])} "
        f"(of {pct(cohort['counterless'])} of impressions whose user had no impression in the 72 h before)",
        f"  pair tier from repeats: {pct(ceilings['pair_from_repeats'])} (repeat exposure within {ttl_hours} h; "
        "the run's guessed candidates can add more)",
    ]
