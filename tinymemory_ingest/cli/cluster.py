"""Commands of the distributed pipeline: `worker`, `beat`, `watch`, `backfill`, `status`."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
import uuid
from typing import TYPE_CHECKING, Annotated

import typer

from tinymemory_ingest.cli.common import ConfigOption, JsonOption, fail, load_settings, opened_services, reported

if TYPE_CHECKING:
    from celery import Celery

    from worker.control import Status
    from worker.settings import Settings


def _app(settings: Settings) -> Celery:
    from engines.contract import ConfigError
    from worker.cluster.celery_app import create_app

    try:
        return create_app(settings)
    except ConfigError as err:
        raise fail(err.message) from err


def register_cluster_commands(app: typer.Typer) -> None:
    """Add the distributed pipeline's commands to `app`."""

    @app.command()
    def worker(
        queues: Annotated[
            str, typer.Option(help="Comma-separated queues to consume.")
        ] = "tm.sync,tm.ingest,tm.backfill",
        concurrency: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 2,
        metrics_port: Annotated[
            int | None, typer.Option(help="Prometheus port (default from settings; 0 = off).")
        ] = None,
        config: ConfigOption = None,
    ) -> None:
        """Run a Celery worker for the given queues (metrics on --metrics-port)."""
        from worker.cluster.queues import parse_queues

        try:
            names = parse_queues(queues)
        except ValueError as err:
            raise typer.BadParameter(str(err)) from err
        settings = load_settings(config)
        from worker.wiring import check_ocr

        with reported():
            check_ocr(settings)  # a language not installed stops the worker here, not each scan it is given
        _start_worker(settings, names, concurrency, settings.metrics_port if metrics_port is None else metrics_port)

    @app.command()
    def beat(config: ConfigOption = None) -> None:
        """Run the beat scheduler: it queues a sync of each polled source whose interval has passed."""
        settings = load_settings(config)
        _logging(settings)
        celery = _app(settings)
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        celery.Beat(schedule=str(settings.data_dir / "celerybeat-schedule"), loglevel="INFO").run()

    @app.command()
    def watch(config: ConfigOption = None) -> None:
        """Watch every folder and file source and queue targeted syncs as files change."""
        settings = load_settings(config)
        _logging(settings)
        _watch(settings, _app(settings))

    @app.command()
    def backfill(
        source_id: Annotated[str, typer.Argument(help="The source to sync now.")],
        config: ConfigOption = None,
        timeout: Annotated[float, typer.Option(help="Give up waiting after this many seconds (0 = never).")] = 0,
    ) -> None:
        """Queue a full sync of a source, then show its progress live until it is done."""
        settings = load_settings(config)
        raise typer.Exit(_backfill(settings, _app(settings), source_id, timeout))

    @app.command()
    def status(config: ConfigOption = None, as_json: JsonOption = False) -> None:
        """Sources with their units and last sync, dead letters, the engine's vector backlog with its ETA, and
        (with Redis) queue depths and workers."""
        from worker import control

        with opened_services(config) as services:
            vectors = asyncio.run(control.engine_vector_backlog(services.engine()))
            report = control.status(services.state(), services.probe(), vectors=vectors)
        if as_json:
            typer.echo(report.model_dump_json())
            return
        _print_status(report)


def _logging(settings: Settings) -> None:
    from worker.logs import configure

    configure(json_lines=settings.log_json)


def _start_worker(settings: Settings, queues: tuple[str, ...], concurrency: int, metrics_port: int) -> None:
    # Before anything imports prometheus_client: the children count in multiprocess mode.
    from worker.cluster.metrics_env import prepare_multiprocess

    directory = prepare_multiprocess(metrics_port, settings.metrics_dir)
    _logging(settings)
    celery = _app(settings)
    if metrics_port:
        from worker.cluster.metrics import MetricsServer
        from worker.redis.client import redis_from_url

        MetricsServer(metrics_port, directory, redis_from_url(settings.redis_url), settings.redis_prefix).start()
    node = f"tinymemory-{os.getpid()}@%h"
    celery.worker_main(["worker", "-Q", ",".join(queues), "-c", str(concurrency), "-n", node, "--loglevel", "INFO"])


def _watch(settings: Settings, celery: Celery) -> None:
    from worker.cluster.watchers import SourceWatchers

    watchers = SourceWatchers(settings, celery)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    typer.echo("watching sources (Ctrl-C to stop)", err=True)
    try:
        while not stop.wait(timeout=settings.beat_tick_s):
            watchers.refresh()
    finally:
        watchers.stop()
    typer.echo("stopped", err=True)


def _backfill(settings: Settings, celery: Celery, source_id: str, timeout: float) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from engines.contract import Error
    from worker import control
    from worker.cluster.runtime import enqueue_sync
    from worker.redis.client import redis_from_url
    from worker.redis.leases import Leases
    from worker.redis.progress import RunProgress
    from worker.state.redis import RedisStateStore

    client = redis_from_url(settings.redis_url)
    try:
        control.get_source(RedisStateStore(client, prefix=settings.redis_prefix), source_id)
    except Error as err:
        raise fail(err.message) from err
    progress = RunProgress(client, prefix=settings.redis_prefix)
    run_id = uuid.uuid4().hex
    progress.start(run_id, source_id=source_id)
    if not enqueue_sync(celery, Leases(client, prefix=settings.redis_prefix), settings, source_id, run_id=run_id):
        typer.echo(f"a sync of {source_id} is already queued or running; it will run again right after", err=True)
        return 0
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    started = time.monotonic()
    with Progress(*columns, TextColumn("{task.fields[items]} items · {task.fields[failed]} errors")) as bar:
        task = bar.add_task(f"backfill {source_id}", total=None, items=0, failed=0)
        while timeout <= 0 or time.monotonic() - started < timeout:
            state = progress.read(run_id)
            if state is None:
                typer.echo("the run's progress expired; see tinymemory status", err=True)
                return 1
            bar.update(task, total=state.planned, completed=state.done, items=state.items, failed=state.failed)
            if state.finished:
                return 0
            time.sleep(0.25)
    typer.echo("gave up waiting; the backfill goes on in the workers", err=True)
    return 1


def _print_status(report: Status) -> None:
    from worker.control import describe_vectors

    if report.queues is not None:
        typer.echo(f"queues: {report.queues}")
        typer.echo(f"workers: {report.workers}")
    typer.echo(f"dead letters: {report.dead_letters}")
    if report.vectors is not None:
        typer.echo(f"vectors: {describe_vectors(report.vectors)}")
    for source in report.sources:
        last = source.last_sync.isoformat() if source.last_sync else "never"
        typer.echo(f"  {source.id}: {source.units} units, last sync {last}")
