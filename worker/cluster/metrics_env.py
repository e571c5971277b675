"""Preparing prometheus_client's multiprocess mode: it reads the variable when first imported.

The worker processes of one host that serve the same metrics port share one directory of counters, so the
worker that holds the port reports every process of every worker there, each counted once; a second
worker on the host neither fails nor serves the same counts twice (see `worker.cluster.metrics`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

VARIABLE = "PROMETHEUS_MULTIPROC_DIR"


def metrics_directory(port: int, configured: Path | None) -> Path:
    """Where the counters of the workers serving `port` on this host are kept (`configured` when given)."""
    if configured is not None:
        return configured
    return Path(tempfile.gettempdir()) / f"tinymemory-metrics-{os.getuid()}-{port}"


def prepare_multiprocess(port: int, configured: Path | None = None) -> Path:
    """Point prometheus_client at the directory for this worker's processes' counters, and return it.

    Call before anything imports `prometheus_client` (so before `worker.cluster.metrics`) and before the
    worker forks its children. With metrics off (`port` 0) the directory is a fresh one of this worker's own.
    A directory already named in the environment wins.
    """
    named = os.environ.get(VARIABLE)
    if named:
        directory = Path(named)
    elif port:
        directory = metrics_directory(port, configured)
    else:
        directory = Path(tempfile.mkdtemp(prefix="tinymemory-metrics-"))
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.environ[VARIABLE] = str(directory)
    return directory
