"""Erasures on real Celery workers: a source erased while two workers backfill it, and an erase worker killed in
the middle of an erasure, which is then resumed and completed. One cluster (two workers and an erase worker)
serves the module's tests, each on sources of its own."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sources import SourceEntry
from tests.integration.cluster import TINYMEMORY, Cluster, cluster_fixture, worker_children, write_notes
from tests.reliability.figures import print_figures
from worker import control
from worker.cluster.celery_app import create_app
from worker.cluster.queues import BEAT_TASK, SYNC_QUEUE
from worker.control import ErasureReceipt, ErasureTarget, Services
from worker.jobs import job_lease

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FILES = 2_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    for made in cluster_fixture(tmp_path_factory.mktemp("cluster")):
        made.start_worker()
        made.start_worker()
        made.start_worker(queues="tm.erase")
        yield made


def _ask(cluster: Cluster, target: ErasureTarget) -> ErasureReceipt:
    with Services(cluster.settings()) as services:
        return asyncio.run(control.request_erasure(services.state(), services.erasures(), target, "ops"))


def _tinymemory(cluster: Cluster, *args: str) -> str:
    done = subprocess.run([TINYMEMORY, *args], env=cluster.env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _receipt(cluster: Cluster, erasure_id: str) -> ErasureReceipt:
    receipt = cluster.state().get_erasure(erasure_id)
    assert receipt is not None
    return receipt


def test_a_source_erased_during_its_backfill_stays_erased(cluster: Cluster, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    write_notes(folder, FILES)
    # Polled every second: beat would sync it again if anything of it were left.
    cluster.state().put_source(SourceEntry(id="notes", kind="folder", label="notes", path=str(folder), interval_s=1))
    assert cluster.sync("notes")
    cluster.wait(lambda: cluster.committed("notes") >= 200, 90, "the backfill under way")

    receipt = _ask(cluster, ErasureTarget(source_id="notes"))
    erasure_id = receipt.id
    assert receipt.status == "queued"
    cluster.wait(lambda: _receipt(cluster, erasure_id).finished, 60, "the erasure")
    done = _receipt(cluster, erasure_id)
    assert done.status == "completed", done.reason
    assert done.verification is not None and done.verification.passed
    assert 0 < done.forgotten < FILES  # erased in the middle of the backfill
    assert cluster.items("notes") == []

    # Queued batches drain (dropping their items), beat runs, a sync is asked for: nothing comes back.
    create_app(cluster.settings()).send_task(BEAT_TASK, queue=SYNC_QUEUE)
    cluster.sync("notes")
    cluster.wait(cluster.idle, 90, "the queues drained")
    assert cluster.items("notes") == []
    state = cluster.state()
    assert (state.get_source("notes"), state.unit_states("notes"), state.dead_letters("notes")) == (None, {}, [])
    assert state.get_erasure(erasure_id) == done  # the receipt outlives the source's state
    assert _ask(cluster, ErasureTarget(source_id="notes")).id == erasure_id


def test_an_erase_worker_killed_mid_erasure_leaves_it_to_be_resumed(
    cluster: Cluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    folder = tmp_path / "drafts"
    write_notes(folder, 60)
    cluster.add_folder("drafts", folder)
    eraser = cluster.workers[2]
    assert cluster.sync("drafts")
    cluster.wait_done("drafts", 60)
    # A job of the source that is still running: the erasure waits for it, in its `drained` step.
    leases = cluster.state().leases()
    running = leases.join(job_lease("drafts"), 120)
    # Asked on the command line: it queues the erasure, prints the id and returns while it waits.
    asked = _tinymemory(cluster, "erase", "source", "drafts")
    receipt = _receipt(cluster, asked.strip())
    assert receipt.requested_by == "cli" and not receipt.finished
    cluster.wait(lambda: _receipt(cluster, receipt.id).steps == ["tombstoned", "stopped"], 60, "the erasure waiting")
    children = worker_children(eraser)
    assert children
    for pid in children:
        os.kill(pid, signal.SIGKILL)  # the worker respawns its child; the message goes back to the queue
    leases.leave(job_lease("drafts"), running)

    cluster.wait(lambda: _receipt(cluster, receipt.id).finished, 90, "the resumed erasure")
    done = _receipt(cluster, receipt.id)
    left = cluster.items("drafts")
    cluster.wait(cluster.idle, 30, "the erase queue drained")
    verified = done.verification is not None and done.verification.passed
    print_figures(
        request,
        f"items left: {len(left)}; stuck: {int(not cluster.idle())}; erasure {done.status} in {done.runs} runs, "
        f"verified: {verified}",
        f"the erase worker's {len(children)} pool process(es) SIGKILLed while the erasure waited in its `stopped` step",
    )
    assert done.status == "completed", done.reason
    assert done.runs == 2 and done.steps[:2] == ["tombstoned", "stopped"]
    assert left == []
    followed = _tinymemory(cluster, "erase", "source", "drafts", "--wait", "--json")  # the same request
    assert ErasureReceipt.model_validate_json(followed.splitlines()[1]) == done
    assert ErasureReceipt.model_validate_json(_tinymemory(cluster, "erase", "status", receipt.id, "--json")) == done
