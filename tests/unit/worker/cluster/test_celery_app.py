"""The Celery app's settings that matter, and the start-up refusal of unsafe time limits."""

from __future__ import annotations

import pytest

from engines.contract import ConfigError
from worker.cluster.celery_app import celery_config, check_time_limits, create_app
from worker.cluster.queues import ALL_QUEUES, BEAT_TASK, INGEST_TASK, SYNC_TASK, parse_queues
from worker.settings import Settings


def test_the_settings_that_matter() -> None:
    config = celery_config(Settings(redis_prefix="tm:x:"))
    assert config["task_acks_late"] is True
    assert config["task_reject_on_worker_lost"] is True
    assert config["worker_prefetch_multiplier"] == 1
    assert config["task_ignore_result"] is True
    assert config["accept_content"] == ["json"]
    assert config["task_time_limit"] > config["task_soft_time_limit"]
    options = config["broker_transport_options"]
    assert options["visibility_timeout"] > config["task_time_limit"]
    assert options["global_keyprefix"].startswith("tm:x:")
    assert [q.name for q in config["task_queues"]] == list(ALL_QUEUES)


def test_a_visibility_timeout_not_above_the_hard_limit_is_refused_naming_the_setting() -> None:
    with pytest.raises(ConfigError, match="TINYMEMORY_VISIBILITY_TIMEOUT_S") as caught:
        check_time_limits(Settings(visibility_timeout_s=600, task_hard_limit_s=600))
    assert "600 s" in str(caught.value)
    with pytest.raises(ConfigError, match="TINYMEMORY_TASK_SOFT_LIMIT_S"):
        check_time_limits(Settings(task_soft_limit_s=700, task_hard_limit_s=600, visibility_timeout_s=900))
    with pytest.raises(ConfigError):
        create_app(Settings(visibility_timeout_s=10, task_hard_limit_s=60))


def test_tasks_are_registered_under_stable_names() -> None:
    app = create_app(Settings())
    assert {SYNC_TASK, INGEST_TASK, BEAT_TASK} <= set(app.tasks)


def test_queue_lists_are_checked() -> None:
    assert parse_queues(" tm.sync, tm.ingest ") == ("tm.sync", "tm.ingest")
    with pytest.raises(ValueError, match=r"unknown queue tm\.nope"):
        parse_queues("tm.sync,tm.nope")
