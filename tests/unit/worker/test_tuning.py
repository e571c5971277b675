"""A pipeline process lets the cyclic garbage collector run less often, never more often."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from worker.embedded.runtime import EmbeddedRuntime
from worker.settings import Settings
from worker.tuning import COLLECT_EVERY, collect_less


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def test_the_embedded_runtime_collects_less(tmp_path: Path) -> None:
    gc.set_threshold(700, 10, 10)
    with EmbeddedRuntime(Settings(data_dir=tmp_path)):
        assert gc.get_threshold() == (COLLECT_EVERY, 10, 10)


def test_a_higher_threshold_already_set_is_kept() -> None:
    gc.set_threshold(COLLECT_EVERY * 5, 7, 3)
    collect_less()
    assert gc.get_threshold() == (COLLECT_EVERY * 5, 7, 3)


def test_a_celery_pool_process_collects_less_as_it_starts() -> None:
    from celery.signals import worker_process_init

    from worker.cluster.celery_app import create_app

    create_app(Settings())
    gc.set_threshold(700, 10, 10)
    worker_process_init.send(sender=None)
    assert gc.get_threshold()[0] == COLLECT_EVERY
