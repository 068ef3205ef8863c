"""The hour loop of a synthetic world: traffic, candidates, impressions and true outcomes, one hour at a time.

All randomness comes from one generator seeded by the config, drawn in a fixed order, so a config and seed
give the same tables on every run. Memory holds the population and per-user state, never the whole log.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from solaris.data.schema import IMPRESSIONS, REQUESTS, TS
from solaris.data.synthetic import retrieval
from solaris.data.synthetic.config import WorldConfig
from solaris.data.synthetic.population import Items, Users, drift, make_items, make_users
from solaris.data.synthetic.truth import (
    History,
    conversion_probability,
    history_logit,
    sigmoid,
    solve_intercept,
    static_logit,
    time_of_day_effect,
)

HOUR_US = 3_600_000_000
REPEAT_WINDOW_HOURS = 24
CALIBRATION_REQUESTS = 20_000
PEAK_HOUR = 16  # UTC hour of the most traffic


@dataclass(frozen=True)
class Funnel:
    """What retrieval and the logging policy made of R requests: pool slots and item ids."""

    slots: np.ndarray  # (R, C) daily-pool slots of the candidates, ascending = retrieval order
    candidates: np.ndarray  # (R, C) item ids
    shown_slots: np.ndarray  # (R, S) pool slots of the shown items, by position
    shown: np.ndarray  # (R, S) item ids by position


@dataclass(frozen=True)
class HourBatch:
    """One hour of traffic: R requests with C candidates each, the first S of a policy ranking shown."""

    request_id: np.ndarray  # (R,) int64
    ts_us: np.ndarray  # (R,) int64, UTC microseconds, ascending
    user: np.ndarray  # (R,) int64
    candidates: np.ndarray  # (R, C) item ids in retrieval order
    shown: np.ndarray  # (R, S) item ids by position
    click: np.ndarray  # (R, S) bool
    conversion: np.ndarray  # (R, S) bool
    logit: np.ndarray  # (R, S) the true click logit
    static_logit: np.ndarray  # (R, S) the same without the history terms (fatigue, momentum)
    repeated: np.ndarray  # (R, C) bool: candidate already the user's candidate in the previous 24 h

    def requests_table(self) -> pa.Table:
        n, c = self.candidates.shape
        offsets = pa.array(np.arange(0, n * c + 1, c, dtype=np.int32))
        lists = pa.ListArray.from_arrays(offsets, pa.array(self.candidates.ravel().astype(np.int64)))
        columns = [pa.array(self.request_id), pa.array(self.ts_us).cast(TS), pa.array(self.user), lists]
        return pa.table(columns, schema=REQUESTS)

    def impressions_table(self) -> pa.Table:
        n, s = self.shown.shape
        columns = [
            np.repeat(self.request_id, s),
            pa.array(np.repeat(self.ts_us, s)).cast(TS),
            np.repeat(self.user, s),
            self.shown.ravel().astype(np.int64),
            np.tile(np.arange(s, dtype=np.int16), n),
            self.click.ravel().astype(np.int8),
            self.conversion.ravel().astype(np.int8),
        ]
        return pa.table([pa.array(col) for col in columns], schema=IMPRESSIONS)


def expected_requests(config: WorldConfig, users: Users, hours: np.ndarray) -> np.ndarray:
    """``(len(hours), users)`` each user's expected requests in each hour of the span (hours from its start):
    the Poisson rate the simulator draws from, and the ground truth of when a user comes back."""
    hour_of_day = (config.start.hour + hours) % 24
    cycle = 1.0 + config.diurnal_amplitude * np.cos(2 * np.pi * (hour_of_day - PEAK_HOUR) / 24)
    signed_up = users.signup_hour[None, :] <= hours[:, None]
    return users.activity[None, :] / 24 * cycle[:, None] * signed_up


class Simulator:
    """Steps a world through its span; :meth:`hours` yields one :class:`HourBatch` per hour."""

    def __init__(self, config: WorldConfig) -> None:
        self.config = config
        self.rng = np.random.default_rng(config.seed)
        self.users: Users = make_users(config, self.rng)
        self.items: Items = make_items(config, self.rng)
        self.category_phase = self.rng.uniform(0, 24, config.n_categories)
        self.latent = self.users.latent  # today's interests: what the ground truth uses
        self.stale = self.users.latent  # yesterday's: what the logging policy knows
        self.pools = np.full((config.n_users, config.pool_size), config.n_items, dtype=np.int32)
        self.history = History.empty(config.n_users, config.pool_size, config.n_categories)
        self.next_request_id = 0
        self.intercept, self.calibrated = 0.0, False  # solved on the first day with traffic by _calibrate
        self.start_us = int(config.start.timestamp()) * 1_000_000

    def hours(self) -> Iterator[HourBatch]:
        for day in range(self.config.days):
            counts = self._start_day(day)
            for h in range(24):
                yield self._hour(day * 24 + h, counts[h])

    def _hour_of_day(self, hours: np.ndarray | int) -> np.ndarray | int:
        return (self.config.start.hour + hours) % 24

    def _start_day(self, day: int) -> np.ndarray:
        """Drift interests, draw the day's requests per user and hour, and refresh the active users' pools."""
        c = self.config
        if day:
            self.stale, self.latent = self.latent, drift(self.latent, c.drift, self.rng)
        counts = self.rng.poisson(expected_requests(c, self.users, day * 24 + np.arange(24)))
        active = np.flatnonzero(counts.sum(axis=0))
        live = self.items.live(day)
        if len(live) < c.pool_size:
            raise ValueError(
                f"world config {c.name!r}: {len(live)} items run on day {day}, fewer than pool_size={c.pool_size}; "
                f"raise n_items or item_life_days"
            )
        pools = live[
            retrieval.daily_pools(
                self.latent[active],
                self.items.latent[live],
                self.items.category[live],
                self.items.log_popularity[live],
                c.pool_size,
                c.retrieval_noise,
                c.retrieval_popularity,
                self.rng,
            )
        ].astype(np.int32)
        self.history.follow_pools(active, retrieval.slot_sources(self.pools[active], pools))
        self.pools[active] = pools
        if not self.calibrated and counts.any():
            self.intercept, self.calibrated = self._calibrate(counts), True
        return counts

    def _calibrate(self, counts: np.ndarray) -> float:
        """Solve the click intercept on a sample of the first day's impressions, before any history exists."""
        users = np.repeat(np.arange(self.config.n_users, dtype=np.int64), counts.sum(axis=0))
        users = self.rng.choice(users, size=min(len(users), CALIBRATION_REQUESTS), replace=False)
        funnel = self._funnel(users)
        logits = self._static_logits(users, funnel, np.zeros(funnel.shown.shape, np.float32), intercept=0.0)
        return solve_intercept(logits, self.config.truth.target_ctr)

    def _funnel(self, users: np.ndarray) -> Funnel:
        """Candidates from each request's daily pool, then the logging policy's ranking of them."""
        c, items = self.config, self.items
        slots = retrieval.sample_slots(len(users), c.pool_size, c.n_candidates, c.candidate_rank_decay, self.rng)
        candidates = np.take_along_axis(self.pools[users], slots, axis=1)
        stale_affinity = np.einsum("rd,rcd->rc", self.stale[users], items.latent[candidates])
        columns = retrieval.policy_rank(
            stale_affinity,
            items.log_popularity[candidates],
            c.retrieval_popularity,
            c.n_shown,
            c.policy_noise,
            self.rng,
        )
        shown = np.take_along_axis(candidates, columns, axis=1)
        return Funnel(slots, candidates, np.take_along_axis(slots, columns, axis=1), shown)

    def _static_logits(
        self, users: np.ndarray, funnel: Funnel, time_of_day: np.ndarray, intercept: float
    ) -> np.ndarray:
        shown = funnel.shown
        return static_logit(
            self.config.truth,
            intercept,
            self.latent[users],
            self.items.latent[shown],
            time_of_day,
            np.arange(self.config.n_shown)[None, :],
            self.users.bias[users],
            self.items.bias[shown],
        )

    def _hour(self, hour: int, counts: np.ndarray) -> HourBatch:
        c, rng, t = self.config, self.rng, self.config.truth
        offsets = rng.integers(0, HOUR_US, int(counts.sum()))
        order = np.argsort(offsets, kind="stable")
        users = np.repeat(np.arange(c.n_users, dtype=np.int64), counts)[order]
        ts_us = self.start_us + hour * HOUR_US + offsets[order]

        funnel = self._funnel(users)
        repeated = self.history.repeated(users, funnel.slots, hour, REPEAT_WINDOW_HOURS)
        categories = self.items.category[funnel.shown]
        static = self._static_logits(
            users,
            funnel,
            time_of_day_effect(t, self.category_phase, self._hour_of_day(hour))[categories],
            self.intercept,
        )
        history = history_logit(
            t,
            self.history.exposures(users, funnel.shown_slots, hour, t.fatigue_tau_hours),
            self.history.category_clicks(users, categories, hour, t.momentum_tau_hours),
        )
        logit = static + history
        click = rng.random(logit.shape) < sigmoid(logit)
        p_conversion = conversion_probability(
            t, self.users.trait[users], self.items.price_bucket[funnel.shown], c.n_price_buckets
        )
        conversion = click & (rng.random(logit.shape) < p_conversion)
        self.history.record(hour, t, users, funnel.slots, funnel.shown_slots, categories, click)

        request_id = self.next_request_id + np.arange(len(users), dtype=np.int64)
        self.next_request_id += len(users)
        return HourBatch(
            request_id, ts_us, users, funnel.candidates, funnel.shown, click, conversion, logit, static, repeated
        )
