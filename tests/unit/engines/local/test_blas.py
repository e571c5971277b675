"""Concurrent searches run on the engine's reading threads, so numpy's BLAS is held to one thread a call."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info

from engines.local import LocalEngine


def test_an_engine_holds_blas_to_one_thread(tmp_path: Path) -> None:
    np.ones((4, 4)) @ np.ones(4)  # BLAS is loaded, as the first search loads it
    engine = LocalEngine(tmp_path / "m.sqlite3")
    try:
        blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
        assert blas, "numpy came without a BLAS threadpoolctl can see"
        assert {pool["num_threads"] for pool in blas} == {1}
    finally:
        engine.close()
