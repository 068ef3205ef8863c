"""The reader's in-memory item lists: loaded once per generation, served as of each read's time."""

from __future__ import annotations

import numpy as np

from solaris.store.codec import encode_lists
from solaris.store.item_lists import ItemListCache

HOUR = 3_600_000_000


def rows(generation: int) -> list[tuple]:
    """Items 3 and 7 (fresh in hours 1-2 and 2-3), as ``read_item_lists`` returns them."""
    packed = encode_lists(np.array([[4, 5], [8, -1]]), np.array([[0.5, 0.25], [1.0, 0.0]]))
    return [(generation, 3, HOUR, 3 * HOUR, packed[0]), (generation, 7, 2 * HOUR, 3 * HOUR, packed[1])]


class Loads:
    def __init__(self) -> None:
        self.generation, self.count = 1, 0

    def __call__(self) -> list[tuple]:
        self.count += 1
        return rows(self.generation)


def test_lists_load_once_per_generation() -> None:
    cache, load = ItemListCache(), Loads()
    items = np.array([3, 7])
    for _ in range(3):
        cache.lists_at("v", 1, items, 2 * HOUR, load)
    assert load.count == 1
    load.generation = 2
    cache.lists_at("v", 2, items, 2 * HOUR, load)
    cache.lists_at("v", 2, items, 2 * HOUR, load)
    assert load.count == 2
    assert not len(cache.lists_at("w", None, items, 2 * HOUR, load).items)  # a version without lists
    assert load.count == 2


def test_the_copy_serves_each_list_only_while_fresh_and_only_for_the_items_asked() -> None:
    cache, load = ItemListCache(), Loads()
    first = cache.lists_at("v", 1, np.array([3, 7, 9]), HOUR, load)
    assert first.items.tolist() == [3]
    assert first.neighbour_ids.tolist() == [[4, 5]] and first.similarities.tolist() == [[0.5, 0.25]]
    both = cache.lists_at("v", 1, np.array([3, 7]), 2 * HOUR, load)
    assert both.items.tolist() == [3, 7]
    assert both.neighbour_ids.tolist() == [[4, 5], [8, -1]]
    assert cache.lists_at("v", 1, np.array([7]), 2 * HOUR, load).neighbour_ids.tolist() == [[8, -1]]
    assert not len(cache.lists_at("v", 1, np.array([3, 7]), 3 * HOUR, load).items)  # both expired


def test_lists_of_different_lengths_are_padded_to_the_longest() -> None:
    """Lists written with another ``a2a_k`` by an earlier hour sit beside this hour's, padded."""
    [long] = encode_lists(np.array([[4, 5]]), np.array([[0.5, 0.25]]))
    [short] = encode_lists(np.array([[8]]), np.array([[1.0]]))
    lists = ItemListCache().lists_at(
        "v", 1, np.array([3, 7]), HOUR, lambda: [(1, 3, 0, 2 * HOUR, long), (1, 7, 0, 2 * HOUR, short)]
    )
    assert lists.neighbour_ids.tolist() == [[4, 5], [8, -1]] and lists.similarities.tolist() == [
        [0.5, 0.25],
        [1.0, 0.0],
    ]
