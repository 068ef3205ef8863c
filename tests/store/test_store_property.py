"""Random write / read / expire sequences against a plain in-memory model of the store."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_helpers import T0

from solaris.store import FeatureStore

DIM = 4
# Small domains so that sequences often revisit a key, and read at the very hour a row expires.
USERS = st.integers(0, 2)
ITEMS = st.integers(0, 2)
HOURS = st.integers(0, 3)
TTLS = st.integers(1, 2)
READ_TIMES = st.integers(0, 5)
VERSIONS = st.sampled_from([0, 1])
SIMILARITIES = st.sampled_from([-0.5, 0.25, 0.5, 1.0])


def at(hour: int):
    return T0 + timedelta(hours=hour)


@dataclass
class Model:
    """The store's contract in plain Python: dicts keyed like the tables (one row per key, a write replaces
    it), each row (value, created, expires), read point-in-time: fresh at t iff created <= t < expires."""

    pairs: dict[tuple, tuple[np.ndarray, float, float]] = field(default_factory=dict)
    aggs: dict[tuple, tuple[np.ndarray, float, float]] = field(default_factory=dict)
    neighbours: dict[tuple, tuple[list[tuple[int, float]], float, float]] = field(default_factory=dict)

    def fresh(self, table: dict, key: tuple, t: float):
        row = table.get(key)
        return row[0] if row is not None and row[1] <= t < row[2] else None

    def expire(self, t: float) -> None:
        for table in (self.pairs, self.aggs, self.neighbours):
            for key in [k for k, (_, _, expires) in table.items() if expires <= t]:
                del table[key]

    def read(self, v: int, user: int, items: list[int], t: float):
        pair = [self.fresh(self.pairs, (v, user, i), t) for i in items]
        knn = []
        for i in items:
            total, weight = np.zeros(DIM), 0.0
            for j, s in self.fresh(self.neighbours, (v, user), t) or []:
                vec = self.fresh(self.pairs, (v, j, i), t)
                if s > 0 and vec is not None:
                    total, weight = total + s * vec.astype(np.float64), weight + s
            knn.append(total / weight if weight else None)
        return pair, self.fresh(self.aggs, (v, user), t), knn


write_pairs = st.tuples(
    st.just("pairs"), VERSIONS, st.lists(st.tuples(USERS, ITEMS), min_size=1, max_size=6, unique=True), HOURS, TTLS
)
write_aggs = st.tuples(st.just("aggs"), VERSIONS, st.lists(USERS, min_size=1, max_size=3, unique=True), HOURS, TTLS)
write_neighbours = st.tuples(
    st.just("neighbours"),
    VERSIONS,
    USERS,
    st.lists(st.tuples(USERS, SIMILARITIES), max_size=3, unique_by=lambda x: x[0]),
    HOURS,
    TTLS,
)
read = st.tuples(st.just("read"), VERSIONS, USERS, st.lists(ITEMS, min_size=1, max_size=4), READ_TIMES)
expire = st.tuples(st.just("expire"), READ_TIMES)
EXAMPLES = itertools.count()
OPERATIONS = st.lists(st.one_of(write_pairs, write_aggs, write_neighbours, read, expire), min_size=1, max_size=15)


def check(got_vec: np.ndarray, got_mask: bool, want: np.ndarray | None, what: str) -> None:
    assert got_mask == (want is not None), f"{what}: presence {got_mask}, model says {want is not None}"
    np.testing.assert_allclose(got_vec, np.zeros(DIM) if want is None else want, rtol=1e-5, atol=1e-6, err_msg=what)


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS, seed=st.integers(0, 2**16))
def test_store_behaves_like_the_model(store: FeatureStore, operations: list[tuple], seed: int) -> None:
    """Examples share one store (a fresh schema each would dominate the run) and isolate themselves by
    registering fresh embedding versions, which the store keeps apart."""
    rng = np.random.default_rng(seed)
    model = Model()
    example = next(EXAMPLES)
    versions = [store.register_embedding_version(f"{example}_{fm}", "1", DIM, created_at=T0) for fm in (1, 2)]
    for op in operations:
        kind, args = op[0], op[1:]
        if kind == "pairs":
            v, keys, hour, ttl = args
            vectors = rng.normal(size=(len(keys), DIM)).astype(np.float16).astype(np.float32)
            users, items = np.array(keys).T
            store.write_pair_embeddings(
                "r", versions[v], users, items, vectors, np.ones(len(keys)), at(hour), at(hour + ttl)
            )
            model.pairs.update({(v, u, i): (vec, hour, hour + ttl) for (u, i), vec in zip(keys, vectors, strict=True)})
        elif kind == "aggs":
            v, users, hour, ttl = args
            vectors = rng.normal(size=(len(users), DIM)).astype(np.float16).astype(np.float32)
            store.write_user_aggregates(
                "r", versions[v], np.array(users), vectors, np.ones(len(users), int), 24, at(hour), at(hour + ttl)
            )
            model.aggs.update({(v, u): (vec, hour, hour + ttl) for u, vec in zip(users, vectors, strict=True)})
        elif kind == "neighbours":
            v, user, lst, hour, ttl = args
            lst = [(j, s) for j, s in lst if j != user]
            ids = np.array([[j for j, _ in lst] + [-1]])
            sims = np.array([[s for _, s in lst] + [0.0]])
            store.write_user_neighbours("r", versions[v], np.array([user]), ids, sims, at(hour), at(hour + ttl))
            model.neighbours[(v, user)] = (lst, hour, hour + ttl)
        elif kind == "read":
            v, user, items, t = args
            got = store.read_tiers(versions[v], user, np.array(items), at(t))
            pair, agg, knn = model.read(v, user, items, t)
            fresh = store.fresh_pairs(versions[v], np.full(len(items), user), np.array(items), at(t))
            assert fresh.tolist() == [p is not None for p in pair], f"fresh_pairs of {user} at {t}"
            check(got.user_agg, got.user_agg_present, agg, f"user_agg of {user} at {t}")
            for k, item in enumerate(items):
                check(got.pair[k], bool(got.pair_mask[k]), pair[k], f"pair ({user}, {item}) at {t}")
                check(got.knn[k], bool(got.knn_mask[k]), knn[k], f"knn ({user}, {item}) at {t}")
        else:
            (t,) = args
            store.expire(at(t), batch_size=2)
            model.expire(t)
