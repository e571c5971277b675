"""The vector copy's ranking: the best passage of each item, best first, the same at any depth (ties by rowid)."""

from __future__ import annotations

import numpy as np
import pytest

from engines.local.vectors import Snapshot


def tied_snapshot(seed: int = 1) -> Snapshot:
    """400 passages of 150 items, drawn from only 40 distinct unit vectors: many exact ties."""
    rng = np.random.default_rng(seed)
    distinct = rng.normal(size=(40, 8)).astype(np.float32)
    distinct /= np.linalg.norm(distinct, axis=1, keepdims=True)
    rows = rng.permutation(400)
    rowids = (rows * 3 + 7).astype(np.int64)  # not in order, with gaps
    items = rng.integers(0, 150, size=400).astype(np.int64)
    return Snapshot(rowids=rowids, items=items, matrix=distinct[rng.integers(0, 40, size=400)])


def brute_force(snapshot: Snapshot, query: np.ndarray, threshold: float) -> list[tuple[int, int]]:
    """Every item by its best passage: highest cosine first, ties by the lower rowid."""
    scores = snapshot.matrix @ query
    best: dict[int, tuple[float, int]] = {}
    for item, rowid, score in zip(snapshot.items.tolist(), snapshot.rowids.tolist(), scores.tolist(), strict=True):
        if score >= threshold and (item not in best or (-score, rowid) < (-best[item][0], best[item][1])):
            best[item] = (score, rowid)
    return [(item, rowid) for item, (score, rowid) in sorted(best.items(), key=lambda e: (-e[1][0], e[1][1]))]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_depth_reads_the_start_of_one_order(seed: int) -> None:
    snapshot = tied_snapshot(seed)
    query = snapshot.matrix[0]
    for threshold in (-1.0, 0.2):
        expected = brute_force(snapshot, query, threshold)
        for depth in (1, 5, 17, 33, 64, 100, 149, 500):
            items, rowids, scores = snapshot.best_per_item(query, threshold, depth)
            assert list(zip(items.tolist(), rowids.tolist(), strict=True)) == expected[:depth], (threshold, depth)
            assert np.all(np.diff(scores) <= 0)


def test_among_restricts_to_the_items_named() -> None:
    snapshot = tied_snapshot()
    query = snapshot.matrix[3]
    among = np.array([5, 9, 77, 120], dtype=np.int64)
    items, _, _ = snapshot.best_per_item(query, -1.0, 10, among=among)
    expected = [item for item, _ in brute_force(snapshot, query, -1.0) if item in set(among.tolist())]
    assert items.tolist() == expected
