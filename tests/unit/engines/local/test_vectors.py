"""The vector ranking of a snapshot: the best passage of each item, best first, the same at any depth (ties by
rowid), whether its vectors are one matrix or several blocks of the vector file."""

from __future__ import annotations

import numpy as np
import pytest

from engines.local import vectors
from engines.local.vectors import Snapshot


def tied_snapshot(seed: int = 1, block: int = 400) -> Snapshot:
    """400 passages of 150 items, drawn from only 40 distinct unit vectors: many exact ties; the vectors in
    blocks of `block` rows."""
    rng = np.random.default_rng(seed)
    distinct = rng.normal(size=(40, 8)).astype(np.float32)
    distinct /= np.linalg.norm(distinct, axis=1, keepdims=True)
    rows = rng.permutation(400)
    rowids = (rows * 3 + 7).astype(np.int64)  # not in order, with gaps
    items = rng.integers(0, 150, size=400).astype(np.int64)
    matrix = distinct[rng.integers(0, 40, size=400)]
    blocks = tuple(matrix[start : start + block] for start in range(0, 400, block))
    return Snapshot(rowids=rowids, items=items, matrices=blocks, dimensions=8)


def brute_force(snapshot: Snapshot, query: np.ndarray, threshold: float) -> list[tuple[int, int]]:
    """Every item by its best passage: highest cosine first, ties by the lower rowid (each row's cosine summed
    alike wherever it is, as equal vectors must score equally)."""
    scores = np.vecdot(np.concatenate(snapshot.matrices), query)
    best: dict[int, tuple[float, int]] = {}
    for item, rowid, score in zip(snapshot.items.tolist(), snapshot.rowids.tolist(), scores.tolist(), strict=True):
        if score >= threshold and (item not in best or (-score, rowid) < (-best[item][0], best[item][1])):
            best[item] = (score, rowid)
    return [(item, rowid) for item, (score, rowid) in sorted(best.items(), key=lambda e: (-e[1][0], e[1][1]))]


@pytest.mark.parametrize(("seed", "block"), [(1, 400), (2, 400), (3, 128), (4, 7)])
def test_every_depth_reads_the_start_of_one_order(seed: int, block: int) -> None:
    snapshot = tied_snapshot(seed, block)
    query = snapshot.matrices[0][0]
    for threshold in (-1.0, 0.2):
        expected = brute_force(snapshot, query, threshold)
        for depth in (1, 5, 17, 33, 64, 100, 149, 500):
            items, rowids, scores = snapshot.best_per_item(query, threshold, depth)
            assert list(zip(items.tolist(), rowids.tolist(), strict=True)) == expected[:depth], (threshold, depth)
            assert np.all(np.diff(scores) <= 0)


def test_among_restricts_to_the_items_named() -> None:
    snapshot = tied_snapshot()
    query = snapshot.matrices[0][3]
    among = np.array([5, 9, 77, 120], dtype=np.int64)
    items, _, _ = snapshot.best_per_item(query, -1.0, 10, among=among)
    expected = [item for item, _ in brute_force(snapshot, query, -1.0) if item in set(among.tolist())]
    assert items.tolist() == expected


def test_rows_not_live_are_never_ranked_nor_read() -> None:
    full = tied_snapshot(5, 64)
    live = np.random.default_rng(5).random(400) < 0.5
    snapshot = Snapshot(full.rowids, full.items, full.matrices, full.dimensions, live)
    query = full.matrices[0][0]
    kept = Snapshot(full.rowids[live], full.items[live], (np.concatenate(full.matrices)[live],), 8)
    for depth in (1, 10, 150):
        got = snapshot.best_per_item(query, -1.0, depth)
        expected = kept.best_per_item(query, -1.0, depth)
        assert all(np.array_equal(a, b) for a, b in zip(got, expected, strict=True))
    dead = full.rowids[~live][:3].tolist()
    alive = full.rowids[live][:2].tolist()
    found = snapshot.vectors_of(dead + alive)
    matrix = np.concatenate(full.matrices)
    assert np.array_equal(found, matrix[np.isin(full.rowids, alive)])


@pytest.mark.parametrize("threads", [2, 3, 8])
def test_a_scan_spread_over_threads_scores_every_row_as_one_thread_does(
    threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(3)
    matrices = tuple(rng.standard_normal((rows, 16)).astype(np.float32) for rows in (512, 512, 512, 512, 77))
    count = sum(len(m) for m in matrices)
    snapshot = Snapshot(np.arange(count), np.arange(count) // 2, matrices, 16)
    query = rng.standard_normal(16).astype(np.float32)
    monkeypatch.setattr(vectors, "SCAN_THREADS", 1)
    alone = snapshot.scores(query)
    monkeypatch.setattr(vectors, "SCAN_THREADS", threads)
    spread = snapshot.scores(query)
    assert spread.tobytes() == alone.tobytes()
    assert np.allclose(alone, np.concatenate(matrices) @ query, atol=1e-5)
    empty = Snapshot(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), (), 16)
    assert len(empty.scores(query)) == 0
