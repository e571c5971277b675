"""The Celery app of the distributed pipeline: broker, queues, the settings that matter, the tasks.

Tasks are thin: each unpacks ids and calls one job function of `worker.jobs` with the worker
process's runtime (`worker.cluster`). Messages are JSON (ids and changes), never pickles; no result
is stored.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.process
from typing import Any

from celery import Celery
from celery.signals import worker_process_init
from kombu import Queue

from engines.contract import ConfigError
from worker.cluster.queues import ALL_QUEUES, BEAT_TASK, RULES, SYNC_QUEUE
from worker.redis.keys import Keys
from worker.settings import Settings
from worker.tuning import collect_less


def check_time_limits(settings: Settings) -> None:
    """Refuse a broker visibility timeout that is not larger than the hard task time limit.

    Redis redelivers an unacknowledged message after the visibility timeout; were it shorter than a
    task may run, a long batch would be delivered to a second worker while the first still runs it.
    """
    if settings.visibility_timeout_s <= settings.task_hard_limit_s:
        raise ConfigError(
            f"the broker visibility timeout ({settings.visibility_timeout_s:g} s) must be larger than the hard task "
            f"time limit ({settings.task_hard_limit_s:g} s): raise TINYMEMORY_VISIBILITY_TIMEOUT_S or lower "
            "TINYMEMORY_TASK_HARD_LIMIT_S"
        )
    if settings.task_soft_limit_s >= settings.task_hard_limit_s:
        raise ConfigError(
            f"the soft task time limit ({settings.task_soft_limit_s:g} s) must be below the hard one "
            f"({settings.task_hard_limit_s:g} s): lower TINYMEMORY_TASK_SOFT_LIMIT_S"
        )


def celery_config(settings: Settings) -> dict[str, Any]:
    """The Celery settings, from one settings object (the same for every role)."""
    return {
        "broker_url": settings.redis_url.get_secret_value(),
        "broker_connection_retry_on_startup": True,
        # Celery's own keys (queues, unacked messages) start with the project's prefix too.
        "broker_transport_options": {
            "visibility_timeout": settings.visibility_timeout_s,
            "global_keyprefix": Keys(settings.redis_prefix).celery(),
        },
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        # On a lost broker connection, running late-ack tasks are cancelled (they are redelivered and
        # replay): otherwise their acks are lost and they hold the prefetch slot, and the worker stalls.
        "worker_cancel_long_running_tasks_on_connection_loss": True,
        "task_soft_time_limit": settings.task_soft_limit_s,
        "task_time_limit": settings.task_hard_limit_s,
        "task_ignore_result": True,
        "task_serializer": "json",
        "accept_content": ["json"],
        "task_queues": tuple(Queue(name, routing_key=name) for name in ALL_QUEUES),
        "task_default_queue": SYNC_QUEUE,
        "worker_hijack_root_logger": False,
        "worker_send_task_events": True,
        "beat_schedule": {
            "tm-beat-tick": {"task": BEAT_TASK, "schedule": settings.beat_tick_s, "options": {"queue": SYNC_QUEUE}}
        },
    }


def create_app(settings: Settings) -> Celery:
    """A configured app with the tasks registered; refuses unsafe time limits."""
    check_time_limits(settings)
    app = Celery("tinymemory")
    app.conf.update(celery_config(settings))
    app.conf.tinymemory_settings = settings
    # Registers the tasks on this app (late: they load the pipeline).
    from worker.cluster import tasks
    from worker.legacy.tasks import register_legacy_tasks

    tasks.register(app)
    register_legacy_tasks(app)
    worker_process_init.connect(allow_converter_processes, weak=False)
    worker_process_init.connect(lambda **_: collect_less(), weak=False)
    return app


def allow_converter_processes(**_: object) -> None:
    """Let a Celery pool process start converter processes of its own.

    Celery's prefork children are daemonic, and `multiprocessing` refuses children to a daemonic
    process. Conversion needs them (a hostile file must cost its converter, not the worker), and
    they are stopped with the pool process, so the flag is lifted in each pool process as it starts.
    """
    process = multiprocessing.current_process()
    process._config.pop("daemon", None)  # type: ignore[attr-defined]
    # A spawned child inherits the parent's key, which multiprocessing only pickles as plain bytes.
    process._config["authkey"] = multiprocessing.process.AuthenticationString(bytes(process.authkey))  # type: ignore[attr-defined]


def expiry_of(queue: str) -> float | None:
    """How long a message may wait in `queue` before it is dropped (None: never)."""
    return RULES[queue].expires_s
