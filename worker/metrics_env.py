"""Preparing prometheus_client's multiprocess mode: it reads the variable when first imported."""

from __future__ import annotations

import os
import tempfile


def prepare_multiprocess() -> str:
    """Point prometheus_client at a fresh directory for the worker children's counters.

    Call before anything imports `prometheus_client` (so before `worker.metrics`) and before the
    worker forks its children.
    """
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or tempfile.mkdtemp(prefix="tinymemory-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
    return directory
