"""The distributed pipeline on real Redis with real Celery worker processes: exact counts, crashes,
a Redis restart, an unavailable engine, duplicate syncs and fairness."""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.convert import OcrSettings, ocr_unavailable
from tests.fixtures.documents import corrupt_pdf_bytes, docx_bytes, html_bytes, pdf_bytes
from tests.fixtures.scans import bomb_png, image_bytes, noise_png, page_image
from tests.integration.cluster import Cluster, cluster_fixture, worker_children, write_notes
from tests.reliability.figures import exactly_once, print_figures

OCR_READY = ocr_unavailable(OcrSettings()) is None

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path)


def _exactly_once(cluster: Cluster, source_id: str, folder: Path, files: int) -> None:
    paths = cluster.items(source_id)
    assert len(paths) == files
    duplicates = [p for p, n in Counter(paths).items() if n > 1]
    assert duplicates == []
    assert {os.path.relpath(p, os.path.realpath(folder)) for p in paths} == set(cluster.state().unit_states(source_id))
    assert cluster.state().dead_letters(source_id) == []


def test_a_2000_file_backfill_through_two_workers_ends_with_exact_counts(cluster: Cluster, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    write_notes(folder, 2_000)
    cluster.add_folder("notes", folder)
    cluster.start_worker()
    cluster.start_worker()
    assert cluster.sync("notes")
    cluster.wait_done("notes", 2_000, within_s=180)
    _exactly_once(cluster, "notes", folder, 2_000)
    # A second sync of the unchanged folder changes nothing.
    assert cluster.sync("notes")
    cluster.wait(lambda: cluster.state().last_sync("notes") is not None and cluster.idle(), 60, "idle")
    assert len(cluster.items("notes")) == 2_000


def test_workers_killed_mid_backfill_lose_and_duplicate_nothing(
    cluster: Cluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    files = 3_000  # the kills take about a second; the backfill outlasts them many times over (asserted below)
    folder = tmp_path / "notes"
    write_notes(folder, files)
    cluster.add_folder("notes", folder)
    workers = [cluster.start_worker(concurrency=2), cluster.start_worker(concurrency=1)]
    cluster.wait(lambda: all(worker_children(w) for w in workers), 60, "workers started")
    assert cluster.sync("notes")
    cluster.wait(lambda: cluster.committed("notes") > 0, 60, "the backfill under way")
    rng = random.Random(5)
    kills = 0
    while kills < 6 and cluster.committed("notes") < files:
        children = [pid for w in workers for pid in worker_children(w)]
        if children:
            os.kill(rng.choice(children), signal.SIGKILL)  # the parent respawns it; the task is redelivered
            kills += 1
        time.sleep(rng.uniform(0.05, 0.3))
    assert kills >= 5, "the backfill ended before five kills: the test proves little"
    cluster.wait_done("notes", files, within_s=300)
    lost, duplicated = exactly_once((str(p.resolve()) for p in folder.rglob("*.md")), cluster.items("notes"))
    stuck, letters = int(not cluster.idle()), len(cluster.state().dead_letters("notes"))
    print_figures(
        request,
        f"items lost: {lost}; duplicated: {duplicated}; stuck: {stuck}; dead letters: {letters}",
        f"{files} files through two workers, {kills} pool processes SIGKILLed",
    )
    _exactly_once(cluster, "notes", folder, files)
    for entry in cluster.state().manifest_entries("notes", list(cluster.state().unit_states("notes"))).values():
        assert entry.item_ids and not entry.stale and not entry.deleted


def test_the_same_source_synced_twice_at_once_runs_once(cluster: Cluster, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    write_notes(folder, 50)
    cluster.add_folder("notes", folder)
    assert cluster.sync("notes") is True
    assert cluster.sync("notes") is False  # already queued: not queued again, but remembered
    cluster.start_worker()
    cluster.wait_done("notes", 50, within_s=60)
    assert len(cluster.items("notes")) == 50


def test_a_one_file_edit_is_stored_within_seconds_during_a_backfill(cluster: Cluster, tmp_path: Path) -> None:
    big, small = tmp_path / "big", tmp_path / "small"
    write_notes(big, 4_000, words="bulk")
    write_notes(small, 1, words="first")
    cluster.add_folder("big", big)
    cluster.add_folder("small", small)
    cluster.start_worker()
    assert cluster.sync("small")
    cluster.wait_done("small", 1, within_s=60)
    assert cluster.sync("big")
    cluster.wait(lambda: cluster.committed("big") >= 200, 60, "the backfill under way")
    (small / "edit.md").write_text("an urgent edit, tokenurgentx\n")
    started = time.monotonic()
    assert cluster.sync("small", hints=["edit.md"])
    cluster.wait(lambda: cluster.committed("small") == 2, 30, "the edit stored")
    seconds = time.monotonic() - started
    assert cluster.committed("big") < 4_000, "the backfill finished first: the test proves nothing"
    assert seconds < 10


def test_workers_convert_documents_and_dead_letter_hostile_ones(cluster: Cluster, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "report.pdf").write_bytes(pdf_bytes(["Intro", "The gravimetric figures", "End"]))
    (folder / "memo.docx").write_bytes(docx_bytes(["Memo", "The heliotropic plan"]))
    (folder / "page.html").write_bytes(html_bytes("Page", "<p>The xerophytic notes</p>"))
    (folder / "broken.pdf").write_bytes(corrupt_pdf_bytes())
    # Scans are read by OCR on the workers as in embedded mode (where this machine has Tesseract's data): a
    # photograph holds no text, which commits its unit with no item, and a bomb is refused.
    scans = _scans() if OCR_READY else {}
    for name, data in scans.items():
        (folder / name).write_bytes(data)
    cluster.add_folder("docs", folder)
    cluster.start_worker()
    assert cluster.sync("docs")
    hostile = sorted(["broken.pdf", *(["huge.png"] if scans else [])])
    committed = 3 + (3 if scans else 0)

    def settled() -> bool:
        return cluster.committed("docs") == committed and len(cluster.state().dead_letters("docs")) == len(hostile)

    cluster.wait(settled, 90, "docs")
    letters = cluster.state().dead_letters("docs")
    assert sorted((letter.unit_id, letter.stage) for letter in letters) == [(name, "convert") for name in hostile]
    texts = {os.path.basename(path): text for path, text in cluster.texts("docs")}
    read = ["scan.pdf", "scan.png"] if scans else []
    assert sorted(texts) == sorted(["memo.docx", "page.html", "report.pdf", *read])
    if scans:
        assert "quokkafruit" in texts["scan.png"] and "brambleweir" in texts["scan.pdf"]


def _scans() -> dict[str, bytes]:
    return {
        "scan.png": image_bytes([page_image(["The quokkafruit harvest."])], "PNG"),
        "scan.pdf": image_bytes([page_image(["The brambleweir minutes."])], "PDF"),
        "photo.png": noise_png(),
        "huge.png": bomb_png(),
    }
