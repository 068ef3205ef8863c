"""The page's charts, drawn on the server as SVG geometry: hours on x with UTC tick labels (the date at the
first tick and at midnight), a unit on y with round ticks, a line per series broken where an hour is missing, and the legend's names.

Nothing is fetched from outside (no script, no CDN): the template draws what :func:`hourly_chart` computes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

# The plot area in SVG user units; the margins hold the axes' labels.
PLOT_WIDTH, PLOT_HEIGHT = 480, 160
MARGIN_LEFT, MARGIN_BOTTOM, MARGIN_TOP, MARGIN_RIGHT = 52, 30, 10, 12
X_TICK_HOURS = 6
Y_TICKS = 4
HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class Series:
    """One line: its legend name, the CSS class that colours it, a value per hour (missing hours: gaps)."""

    name: str
    css: str
    values: Mapping[datetime, float]
    dashed: bool = False


@dataclass(frozen=True)
class Line:
    name: str
    css: str
    dashed: bool
    segments: list[str]  # each an SVG polyline's points: consecutive hours
    dots: list[tuple[float, float]]  # hours with no neighbour, drawn as a dot


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    unit: str
    lines: list[Line]
    x_ticks: list[tuple[float, str]]
    y_ticks: list[tuple[float, str]]
    empty: bool
    width: int = field(default=PLOT_WIDTH)
    height: int = field(default=PLOT_HEIGHT)
    x_label: str = "hours UTC"


@dataclass(frozen=True)
class CurveSeries:
    """One line of an x-y chart: its legend name, CSS class and points (x, y)."""

    name: str
    css: str
    points: Sequence[tuple[float, float]]
    dashed: bool = False


def hourly_chart(
    key: str,
    title: str,
    unit: str,
    series: Sequence[Series],
    start: datetime,
    end: datetime,
    label: Callable[[float], str],
) -> Chart:
    """The hours in ``[start, end)`` of each series; y from 0 to a round number above the largest value."""
    shown = [{h: v for h, v in s.values.items() if start <= h < end and math.isfinite(v)} for s in series]
    top = nice_ceiling(max((v for values in shown for v in values.values()), default=0.0))
    span = (end - start) / HOUR

    def x(hour: datetime) -> float:
        return round((hour - start) / HOUR / span * PLOT_WIDTH, 1)

    def y(value: float) -> float:
        return round(PLOT_HEIGHT * (1 - value / top), 1)

    lines = []
    for s, values in zip(series, shown, strict=True):
        runs = _consecutive(sorted(values))
        segments = [" ".join(f"{x(h)},{y(values[h])}" for h in run) for run in runs if len(run) > 1]
        dots = [(x(run[0]), y(values[run[0]])) for run in runs if len(run) == 1]
        lines.append(Line(s.name, s.css, s.dashed, segments, dots))
    first_tick = start + (-start.hour % X_TICK_HOURS) * HOUR
    x_ticks = []
    for i in range(math.ceil(span) + 1):
        tick = first_tick + i * X_TICK_HOURS * HOUR
        if tick >= end:
            break
        x_ticks.append((x(tick), f"{tick:%b %d}" if tick.hour == 0 or not x_ticks else f"{tick:%H}:00"))
    y_ticks = [(y(top * i / Y_TICKS), label(top * i / Y_TICKS)) for i in range(Y_TICKS + 1)]
    return Chart(key, title, unit, lines, x_ticks, y_ticks, empty=not any(shown))


def curve_chart(
    key: str,
    title: str,
    unit: str,
    x_label: str,
    series: Sequence[CurveSeries],
    marks: Sequence[tuple[str, str, float]],
    label: Callable[[float], str],
) -> Chart:
    """Points on a log x axis (FM calls an hour span decades; ticks at each power of ten) and a linear y axis
    from 0, or below where a value is, to a round number above the largest; each of ``marks`` (name, CSS class,
    x) a dashed vertical line across the plot."""
    xs = [x for s in series for x, _ in s.points if x > 0] + [x for _, _, x in marks if x > 0]
    ys = [y for s in series for _, y in s.points if math.isfinite(y)]
    if not xs or not ys:
        return Chart(key, title, unit, [], [], [], empty=True, x_label=x_label)
    low_decade, high_decade = math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs)))
    high_decade = max(high_decade, low_decade + 1)
    top, bottom = nice_ceiling(max(ys)), -nice_ceiling(-min(ys)) if min(ys) < 0 else 0.0

    def x(value: float) -> float:
        share = (math.log10(value) - low_decade) / (high_decade - low_decade)
        return round(share * PLOT_WIDTH, 1)

    def y(value: float) -> float:
        return round(PLOT_HEIGHT * (top - value) / (top - bottom), 1)

    lines = []
    for s in series:
        points = sorted((px, py) for px, py in s.points if px > 0 and math.isfinite(py))
        drawn = [" ".join(f"{x(px)},{y(py)}" for px, py in points)] if len(points) > 1 else []
        dots = [(x(px), y(py)) for px, py in points]
        lines.append(Line(s.name, s.css, s.dashed, drawn, dots))
    lines += [Line(name, css, True, [f"{x(at)},0 {x(at)},{PLOT_HEIGHT}"], []) for name, css, at in marks if at > 0]
    x_ticks = [(x(10**d), count(10**d)) for d in range(low_decade, high_decade + 1)]
    steps = [bottom + (top - bottom) * i / Y_TICKS for i in range(Y_TICKS + 1)]
    return Chart(key, title, unit, lines, x_ticks, [(y(v), label(v)) for v in steps], False, x_label=x_label)


def nice_ceiling(value: float) -> float:
    """The least of 1, 2, 2.5, 5 times a power of ten at or above ``value`` (1 for nothing to show), so that a
    quarter of it is a round tick."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= value * (1 - 1e-9))


def percent(value: float) -> str:
    return f"{value * 100:g}%"


def count(value: float) -> str:
    return f"{value / 1000:g}k" if value >= 1000 else f"{value:g}"


def milliseconds(value: float) -> str:
    return f"{value:g}"


def _consecutive(hours: Sequence[datetime]) -> list[list[datetime]]:
    runs: list[list[datetime]] = []
    for hour in hours:
        if runs and hour - runs[-1][-1] == HOUR:
            runs[-1].append(hour)
        else:
            runs.append([hour])
    return runs
