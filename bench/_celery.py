"""The Celery mode of `backfill.py`: the distributed pipeline on the local Redis, timed like the embedded one.

`CeleryPipeline` runs N `tinymemory worker --concurrency 1` processes (all of tm.sync, tm.ingest, tm.backfill)
with `TINYMEMORY_STATE=redis`, a fresh key prefix `tm:bench-<hex>:` (Celery's keys carry it too) and a fresh
data directory, whose `memory.sqlite3` they share. Start-up is outside every timing: each worker is waited for
until its pool child is up and its log says `ready.`, then warmed on a throwaway source: Markdown rounds until
every worker has stored a batch (its pool child has built its runtime and written to the memory file), then a
round with HTML files, so each starts its converter as the embedded run's pool is started (the report says
whether those conversions worked); then that source is deleted through a sync and removed. A timed step starts
when the sync is enqueued (`enqueue_sync`, as `tinymemory backfill` does, with a run id for the progress record)
and ends when the run's progress says every planned unit is done or failed and the queues and Celery's
`unacked` hash are empty, polled every 10 ms; if a task raises, its units are never counted, and the step ends
when the queues went quiet (`STALL_S` later), its uncounted units reported. Each step's batch reports and task
times come from the workers' JSON logs (`batch done`, Celery's `received` / `succeeded in`).

`MemorySampler` reads VmRSS from /proc for a process and all its descendants every 100 ms; a tree's peak is
the largest sum seen (shared pages of forked children count once per process, as RSS does).
`redis_usage` reads `INFO memory` and `MEMORY USAGE ... SAMPLES 0` of every key under the prefix.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any, NamedTuple, TypeVar

from engines.contract import ListRequest, MemoryEngine, MetaFilter
from engines.local import LocalEngine
from sources import SourceConfigKind, SourceEntry
from worker.cluster.celery_app import create_app
from worker.cluster.queues import ALL_QUEUES
from worker.cluster.runtime import enqueue_sync
from worker.records import BatchReport, SyncReport
from worker.redis.client import redis_from_url
from worker.redis.keys import Keys
from worker.redis.leases import Leases
from worker.redis.progress import RunProgress
from worker.settings import Settings
from worker.state.redis import RedisStateStore

REDIS_URL = os.environ.get("TINYMEMORY_REDIS_URL", "redis://127.0.0.1:6379/0")
TINYMEMORY = str(Path(sys.executable).with_name("tinymemory"))
QUEUES = "tm.sync,tm.ingest,tm.backfill"
POLL_S = 0.01
STALL_S = 1.0
SAMPLE_S = 0.1
MIB = 1024 * 1024
TARGET_REDIS_BYTES = 50_000_000  # the 50 MB
WARM_SOURCE = "bench-warm"
WARM_HTML = "<html><body><h1>warm</h1><p>a paragraph to convert</p></body></html>\n"


async def count_items(engine: MemoryEngine, where: MetaFilter) -> int:
    """Items the engine lists under a filter, paged."""
    count, cursor = 0, None
    while True:
        page = await engine.list(ListRequest(filter=where, limit=1000, cursor=cursor))
        count += len(page.items)
        cursor = page.next_cursor
        if cursor is None or not page.items:
            return count


# -- process memory ----------------------------------------------------------------------------------------


def children(pid: int) -> list[int]:
    """The children of a process, whichever of its threads started them."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                found.extend(int(child) for child in (task / "children").read_text().split())
    return found


def rss(pid: int) -> int:
    """A process's resident set in bytes (0 once it is gone)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def tree_rss(pid: int) -> list[int]:
    """RSS of a process tree by depth: [the process, its children, their descendants]."""
    by_depth = [rss(pid), 0, 0]
    level = children(pid)
    depth = 1
    while level:
        by_depth[min(depth, 2)] += sum(rss(child) for child in level)
        level = [grandchild for child in level for grandchild in children(child)]
        depth += 1
    return by_depth


@dataclass
class Peak:
    """The largest tree RSS seen, and its split by depth at that moment."""

    total: int = 0
    parts: list[int] = field(default_factory=lambda: [0, 0, 0])


class MemorySampler:
    """Samples the RSS of process trees in a thread every `every_s` while in its `with` block."""

    def __init__(self, roots: dict[str, int], every_s: float = SAMPLE_S) -> None:
        self.roots = roots
        self.every_s = every_s
        self.peaks = {name: Peak() for name in roots}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-rss", daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def sample(self) -> None:
        for name, pid in self.roots.items():
            parts = tree_rss(pid)
            if sum(parts) > self.peaks[name].total:
                self.peaks[name] = Peak(sum(parts), parts)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sample()


def mib(size: int) -> str:
    return f"{size / MIB:,.0f} MiB"


def embedded_rss_line(peak: Peak, maxrss_kib: int) -> str:
    own, kids, below = peak.parts
    return (
        f"peak RSS embedded: {mib(peak.total)} sampled over the process tree (this process {mib(own)} + converter "
        f"processes {mib(kids + below)}); this process's ru_maxrss {mib(maxrss_kib * 1024)}"
    )


# -- the workers' logs -------------------------------------------------------------------------------------


class TaskRun(NamedTuple):
    """One task as a worker's log tells it: worker, task name and id, when received, seconds run, its error."""

    worker: int
    name: str
    task_id: str
    received: float
    seconds: float
    error: str | None = None


def log_lines(path: Path) -> Iterator[dict[str, str]]:
    """The JSON lines of a worker log (Celery's banner and warnings are not JSON)."""
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    yield json.loads(line)


def parse_log(worker: int, path: Path, run_id: str) -> tuple[list[BatchReport], list[TaskRun]]:
    """The run's batch reports, and every task the worker ran (received time and seconds)."""
    batches: list[BatchReport] = []
    received: dict[str, float] = {}
    runs: list[TaskRun] = []
    for line in log_lines(path):
        message = line.get("message", "")
        if message.startswith("batch done: ") and line.get("run_id") == run_id:
            batches.append(BatchReport.model_validate_json(message.removeprefix("batch done: ")))
        elif message.startswith("Task ") and "[" in message:
            name, rest = message.removeprefix("Task ").split("[", 1)
            task_id, outcome = rest.split("]", 1)
            at = datetime.fromisoformat(line["at"]).timestamp()
            if outcome == " received":
                received[task_id] = at
            elif outcome.startswith(" succeeded in ") and task_id in received:
                seconds = float(outcome.removeprefix(" succeeded in ").split("s:")[0])
                runs.append(TaskRun(worker, name, task_id, received[task_id], seconds))
            elif outcome.startswith(" raised unexpected: ") and task_id in received:
                error = outcome.removeprefix(" raised unexpected: ")
                runs.append(TaskRun(worker, name, task_id, received[task_id], at - received[task_id], error))
    return batches, runs


class CelerySync(NamedTuple):
    """One timed step: seconds, the sync's report, its batches' reports, the tasks run meanwhile, and the
    units the run's progress never counted (when a task raised instead of finishing its units)."""

    seconds: float
    sync: SyncReport
    batches: list[BatchReport]
    tasks: list[TaskRun]
    missing: int
    started_at: float  # the enqueue, in the workers' clock (seconds since the epoch)

    @property
    def raised(self) -> list[TaskRun]:
        return [task for task in self.tasks if task.error is not None]


# -- the pipeline ------------------------------------------------------------------------------------------


@dataclass
class RedisUsage:
    before: int
    after: int
    keys: int
    key_bytes: int
    largest: list[tuple[str, int]]


class CeleryPipeline:
    """N `tinymemory worker` processes on a fresh prefix and data directory; stopped and cleaned up on exit."""

    def __init__(self, work: Path, workers: int, redis_url: str = REDIS_URL) -> None:
        self.work = work
        self.count = workers
        self.prefix = f"tm:bench-{uuid.uuid4().hex[:12]}:"
        self.settings = Settings(
            redis_url=redis_url,
            redis_prefix=self.prefix,
            state="redis",
            data_dir=work / "data",
        )
        self.client = redis_from_url(redis_url)
        self.state = RedisStateStore(self.client, prefix=self.prefix)
        self.leases = Leases(self.client, prefix=self.prefix)
        self.progress = RunProgress(self.client, prefix=self.prefix)
        self.app = create_app(self.settings)
        self.processes: list[subprocess.Popen[bytes]] = []
        self.steps: list[CelerySync] = []  # every sync since the warm-up
        self.logs: list[IO[bytes]] = []
        self.used_before = self.used_memory()

    def __enter__(self) -> CeleryPipeline:
        # A SIGTERM (a timeout, a `kill`) unwinds through __exit__, so the workers and keys do not outlive us.
        self._on_term = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
        signal.signal(signal.SIGTERM, self._on_term)
        if kind is not None:
            print(f"celery mode failed; worker logs in {self.work}", file=sys.stderr)

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "TINYMEMORY_STATE": "redis",
            "TINYMEMORY_REDIS_URL": self.settings.redis_url.get_secret_value(),
            "TINYMEMORY_REDIS_PREFIX": self.prefix,
            "TINYMEMORY_DATA_DIR": str(self.settings.data_dir),
            "TINYMEMORY_LOG_JSON": "true",
        }

    def log_path(self, n: int) -> Path:
        return self.work / f"worker-{n + 1}.log"

    def start(self, within_s: float = 60) -> None:
        """Start the workers; return once each has its pool child and says it is ready."""
        self.work.mkdir(parents=True, exist_ok=True)
        command = [TINYMEMORY, "worker", "--queues", QUEUES, "--concurrency", "1", "--metrics-port", "0"]
        for n in range(self.count):
            log = self.log_path(n).open("wb")
            self.logs.append(log)
            self.processes.append(
                subprocess.Popen(command, env=self.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            )
        deadline = time.monotonic() + within_s
        while not all(children(p.pid) and self.says_ready(n) for n, p in enumerate(self.processes)):
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.processes):
                raise RuntimeError(f"workers not ready within {within_s} s; logs in {self.work}")
            time.sleep(0.05)

    def says_ready(self, n: int) -> bool:
        return any(line.get("message", "").endswith(" ready.") for line in log_lines(self.log_path(n)))

    def add_folder(self, source_id: str, folder: Path) -> str:
        entry = SourceEntry(
            id=source_id, kind=SourceConfigKind.FOLDER, label=str(folder), path=os.path.realpath(folder)
        )
        self.state.put_source(entry)
        return source_id

    def warm(self, rounds: int = 3) -> list[TaskRun]:
        """Warm every worker on a throwaway source, then delete its files through a sync and remove it, so the
        memory file and Redis keep nothing of it. Markdown rounds until each worker has stored a batch, then one
        round with an HTML file in every 50, so each worker starts its converter; returns that round's batches
        (a batch that raised there means documents cannot be converted in these workers)."""
        folder = self.work / "warm"
        self.add_folder(WARM_SOURCE, folder)
        everyone = set(range(self.count))
        for attempt in range(rounds):
            step = self.warm_round(folder / f"r{attempt}", html=False)
            stored = {task.worker for task in step.tasks if task.name.endswith("ingest_batch") and not task.error}
            if stored == everyone:
                break
        converting = self.warm_round(folder / "html", html=True)
        for round_folder in folder.iterdir():
            shutil.rmtree(round_folder)
        self.sync(WARM_SOURCE)
        self.state.remove_source(WARM_SOURCE)
        self.steps.clear()
        return [task for task in converting.tasks if task.name.endswith("ingest_batch")]

    def warm_round(self, folder: Path, html: bool) -> CelerySync:
        folder.mkdir(parents=True)
        for n in range(self.count * 200):  # batches of 100: two per worker
            if html and n % 50 == 0:
                (folder / f"w{n:04}.html").write_text(WARM_HTML)
            else:
                (folder / f"w{n:04}.md").write_text(f"# warm {n}\n\nwarm-up note {n} in {folder.name}\n")
        return self.sync(WARM_SOURCE)

    def idle(self) -> bool:
        base = Keys(self.prefix).celery()
        pipe = self.client.pipeline(transaction=False)
        for queue in ALL_QUEUES:
            pipe.llen(base + queue)
        pipe.hlen(base + "unacked")
        return not any(pipe.execute())

    def sync(self, source_id: str, within_s: float = 900) -> CelerySync:
        """Enqueue a sync and wait for it and all its batches; timed from the enqueue to the moment every planned
        unit is counted and nothing is queued or unacknowledged. Should the queues stay empty for `STALL_S` with
        units uncounted (a task raised), the step ends when they emptied, and the uncounted units are reported."""
        run_id = uuid.uuid4().hex
        self.progress.start(run_id)
        gc.collect()
        wall = time.time()
        started = time.perf_counter()
        if not enqueue_sync(self.app, self.leases, self.settings, source_id, run_id=run_id):
            raise RuntimeError(f"a sync of {source_id} was already queued or running")
        idle_since: float | None = None
        while True:
            progress = self.progress.read(run_id)
            idle = self.idle()
            now = time.perf_counter()
            idle_since = (idle_since or now) if idle else None
            if idle and progress is not None and progress.finished:
                seconds = now - started
                break
            if idle_since is not None and now - idle_since >= STALL_S:
                seconds = idle_since - started
                break
            if now - started > within_s:
                raise TimeoutError(f"sync of {source_id} not done within {within_s} s: {progress}")
            time.sleep(POLL_S)
        if progress is None or progress.planned is None:
            raise RuntimeError(f"the sync of {source_id} never planned its run; worker logs in {self.work}")
        missing = max(0, progress.planned - progress.done - progress.failed)
        report = self.state.last_sync(source_id)
        if report is None:
            raise RuntimeError(f"no sync report for {source_id}")
        batches: list[BatchReport] = []
        tasks: list[TaskRun] = []
        for n in range(self.count):
            found, ran = parse_log(n, self.log_path(n), run_id)
            batches.extend(found)
            tasks.extend(task for task in ran if task.received >= wall - 0.01)
        self.steps.append(CelerySync(seconds, report, batches, tasks, missing, wall))
        return self.steps[-1]

    async def items(self, source_id: str, file_path: str | None = None) -> int:
        """Items of the source (or of one file) in the shared memory file, read by a connection of our own."""
        engine = LocalEngine(self.settings.memory_file)
        try:
            return await count_items(engine, MetaFilter(source_id=source_id, file_path=file_path))
        finally:
            engine.close()

    def used_memory(self) -> int:
        return int(self.client.info("memory")["used_memory"])

    def redis_usage(self) -> RedisUsage:
        """Redis's used memory now (and before the workers started), and the size of every key under the prefix."""
        sizes: dict[str, int] = {}
        for key in self.client.scan_iter(match=f"{self.prefix}*", count=1000):
            name = key.decode() if isinstance(key, bytes) else str(key)
            sizes[name.removeprefix(self.prefix)] = int(self.client.memory_usage(key, samples=0) or 0)
        largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:4]
        return RedisUsage(self.used_before, self.used_memory(), len(sizes), sum(sizes.values()), largest)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        for log in self.logs:
            log.close()
        keys = list(self.client.scan_iter(match=f"{self.prefix}*", count=1000))
        for start in range(0, len(keys), 500):
            self.client.delete(*keys[start : start + 500])


T = TypeVar("T")


def run_celery(
    work: Path, workers: int, steps: Callable[[CeleryPipeline], Coroutine[Any, Any, T]]
) -> tuple[T, CeleryReport]:
    """Start and warm `workers` workers, run `steps(pipeline)` (which adds its source); then read Redis's
    memory and the workers' peaks (sampled from their start), and stop them and delete the keys."""
    with CeleryPipeline(work, workers) as cluster:
        cluster.start()
        with MemorySampler({f"{n}": p.pid for n, p in enumerate(cluster.processes)}) as sampler:
            warm = cluster.warm()
            result = asyncio.run(steps(cluster))
        peaks = list(sampler.peaks.values())
        return result, CeleryReport(workers, cluster.prefix, peaks, cluster.redis_usage(), cluster.steps, warm)


# -- the report --------------------------------------------------------------------------------------------


@dataclass
class CeleryReport:
    workers: int
    prefix: str
    peaks: list[Peak]
    redis: RedisUsage
    steps: list[CelerySync]
    warm_batches: list[TaskRun]


def task_lines(steps: Sequence[CelerySync], labels: Sequence[str], workers: int) -> list[str]:
    """Per step and worker: batches run (mean and max seconds each), the sync task's seconds, seconds busy;
    then any task that raised, and the units left uncounted."""
    lines = []
    for label, step in zip(labels, steps, strict=True):
        parts = []
        for n in range(workers):
            ran = [task for task in step.tasks if task.worker == n]
            batches = [task.seconds for task in ran if task.name.endswith("ingest_batch")]
            syncs = [task.seconds for task in ran if task.name.endswith("sync_source")]
            shape = f" (mean {sum(batches) / len(batches):.3f} s, max {max(batches):.3f} s)" if batches else ""
            sync = f" + sync {syncs[0]:.3f} s" if syncs else ""
            busy = sum(task.seconds for task in ran)
            parts.append(f"w{n + 1} {len(batches)} batches{shape}{sync}, busy {busy:.2f} s{_waits(ran, step)}")
        lines.append(f"celery {label} ({step.seconds:.3f} s): " + "; ".join(parts))
        if step.raised or step.missing:
            first = step.raised[0].error if step.raised else "none raised"
            lines.append(f"  FAIL: {len(step.raised)} tasks raised ({first}); {step.missing} units never counted")
    return lines


def _waits(ran: list[TaskRun], step: CelerySync) -> str:
    """When the worker's first task came (after the enqueue), and its waits between one task's end and the next
    one's receipt: what the queue and the worker's own task handling cost it."""
    if not ran:
        return ""
    ordered = sorted(ran, key=lambda task: task.received)
    gaps = sum(max(0.0, b.received - (a.received + a.seconds)) for a, b in itertools.pairwise(ordered))
    return f" (first at {ordered[0].received - step.started_at:.3f} s, waits between tasks {gaps:.2f} s)"


def print_report(report: CeleryReport, labels: Sequence[str]) -> None:
    raised = [task for task in report.warm_batches if task.error]
    verdict = f"FAIL: {len(raised)} raised, first {raised[0].error}" if raised else "OK"
    print(f"celery warm-up: {len(report.warm_batches)} batches with an HTML file to convert  [{verdict}]")
    for line in task_lines(report.steps, labels, report.workers):
        print(line)
    peaks = ", ".join(
        f"worker {n + 1} {mib(peak.total)} (parent {mib(peak.parts[0])} + pool child {mib(peak.parts[1])} + "
        f"converter {mib(peak.parts[2])})"
        for n, peak in enumerate(report.peaks)
    )
    print(f"peak RSS celery, per worker process tree, sampled every {SAMPLE_S:g} s: {peaks}")
    usage = report.redis
    largest = ", ".join(f"{name} {size / 1024:,.0f} KiB" for name, size in usage.largest)
    print(
        f"redis after the run: used_memory {usage.before / MIB:.2f} -> {usage.after / MIB:.2f} MiB "
        f"(+{(usage.after - usage.before) / MIB:.2f} MiB); {usage.keys} keys under {report.prefix} hold "
        f"{usage.key_bytes / MIB:.2f} MiB (MEMORY USAGE; largest: {largest})  target < 50 MB  ratio "
        f"{max(usage.after - usage.before, usage.key_bytes) / TARGET_REDIS_BYTES:.2f}; keys deleted"
    )
