"""Erasure races: a source erased while its watcher reports a burst of changes, and while its dead letters are
replayed. Afterwards nothing of the source is stored, no dead letter of it is left, its receipt is completed
and verified, and nothing comes back."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from engines.contract import ListRequest, MemoryEngine, MetaFilter, NotFoundError
from sources import SourceRequest
from tests.fixtures.documents import ipynb_bytes
from tests.fixtures.processes import served_url
from tests.integration.cluster import TINYMEMORY
from tests.reliability.conftest import Figures, until
from tests.reliability.looping import Looping
from worker import control
from worker.control import ErasureReceipt, ErasureTarget, Services
from worker.embedded import EmbeddedRuntime, InProcessErasures
from worker.settings import Settings
from worker.state.base import StateStore

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# Four batches of notebooks: the replay is still storing when the erasure is asked for (asserted).
LETTERS = 400
NOTES = 200
WATCHER_START_S = 0.5
BURST_S = 3.0
WAVE, WAVE_PAUSE_S = 40, 0.6  # the watcher debounces for 0.5 s
# Past the watcher's debounce and the sync it starts.
SETTLE_S = 1.5


async def source_items(engine: MemoryEngine, source_id: str) -> int:
    """How many items of the source the engine holds (a first page is enough to tell none from some)."""
    page = await engine.list(ListRequest(limit=100, filter=MetaFilter(source_id=source_id)))
    return len(page.items)


def erased_cleanly(receipt: ErasureReceipt | None) -> bool:
    return (
        receipt is not None
        and receipt.status == "completed"
        and receipt.verification is not None
        and receipt.verification.passed
    )


def _committed(state: StateStore, source_id: str) -> int:
    return len(state.unit_states(source_id))


async def test_a_source_erased_while_its_dead_letters_are_replayed_stays_erased(
    tmp_path: Path, figures: Figures
) -> None:
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for n in range(LETTERS):
        (folder / f"nb-{n:04}.ipynb").write_bytes(b"{not a notebook")
    settings = Settings(data_dir=tmp_path / "data", convert_workers=1)
    with EmbeddedRuntime(settings) as runtime:
        state = runtime.state
        source_id = control.add_source(state, SourceRequest(kind="folder", target=str(folder))).id
        await runtime.sync(source_id)
        letters_before = len(state.dead_letters(source_id, limit=2 * LETTERS))
        assert letters_before == LETTERS and _committed(state, source_id) == 0
        for n in range(LETTERS):  # fixed: the replay stores every one of them, unless erased first
            (folder / f"nb-{n:04}.ipynb").write_bytes(ipynb_bytes([("markdown", f"# Notebook {n}\n\nfixed")]))

        replay = asyncio.create_task(control.replay_dead_letters(state, runtime, source_id))
        await until(lambda: _committed(state, source_id) > 0 or replay.done(), 60, "the replay under way")
        committed_when_erased = _committed(state, source_id)
        receipt = await control.request_erasure(state, runtime.erasures, ErasureTarget(source_id=source_id), "ops")
        await replay
        await runtime.erasures.drain()
        done = state.get_erasure(receipt.id)
        left = await source_items(runtime.engine, source_id)
        letters = state.dead_letters(source_id, limit=2 * LETTERS)
        # Nothing comes back: the replay asked again finds no source, and neither does a sync.
        with pytest.raises(NotFoundError):
            await control.replay_dead_letters(state, runtime, source_id)
        left_after = await source_items(runtime.engine, source_id)
        gone = state.get_source(source_id) is None and _committed(state, source_id) == 0

    figures(
        f"items of the source left: {left}, then {left_after}; dead letters left: {len(letters)} "
        f"(of {letters_before}); erasure {done.status if done else None}, verified "
        f"{bool(done and done.verification and done.verification.passed)}; "
        f"units the replay had stored when erased: {committed_when_erased}/{LETTERS}"
    )
    assert 0 < committed_when_erased < LETTERS, "the erasure did not land during the replay: the test proves little"
    assert (left, left_after, letters) == (0, 0, [])
    assert erased_cleanly(done), done
    assert gone


class Burst(Looping):
    """Writes into a watched folder as a checkout or a build would: waves of new files and edits of old ones,
    one every few milliseconds, each wave followed by a pause past the watcher's debounce (an unbroken
    stream is delivered only every ten debounces), counting what it wrote."""

    def __init__(self, folder: Path) -> None:
        super().__init__("watcher-burst")
        self.folder = folder
        self.written = 0

    def step(self) -> None:
        n = self.written
        if n % 2:
            target = self.folder / f"note-{n % NOTES:04}.md"  # an edit of a file stored before
        else:
            target = self.folder / "burst" / f"new-{n:05}.md"
            target.parent.mkdir(exist_ok=True)
        target.write_text(f"# burst {n}\n\nwritten during the burst, wordburst{n}x\n")
        self.written += 1
        time.sleep(WAVE_PAUSE_S if self.written % WAVE == 0 else 0.005)


def _up(folder: Path, data: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "TINYMEMORY_DATA_DIR": str(data), "TINYMEMORY_API_PORT": "0"}
    command = [TINYMEMORY, "up", str(folder)]
    return subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)


async def test_a_source_erased_during_a_watcher_burst_stays_erased(tmp_path: Path, figures: Figures) -> None:
    folder, data = tmp_path / "notes", tmp_path / "data"
    folder.mkdir()
    for n in range(NOTES):
        (folder / f"note-{n:04}.md").write_text(f"# note {n}\n\nthe body of note {n}\n")
    settings = Settings(data_dir=data, convert_workers=1)
    up = _up(folder, data)
    try:
        served_url(up)  # the first sync is done; the watcher starts next
        with Services(settings) as services:
            state = services.state()
            (entry,) = state.list_sources()
            await until(lambda: _committed(state, entry.id) == NOTES, 30, "the first sync")
            await asyncio.sleep(WATCHER_START_S)
            began = time.monotonic()
            with Burst(folder) as burst:
                # Erase once the watcher's syncs have stored some of the burst, half way through it.
                await until(lambda: _committed(state, entry.id) > NOTES, 30, "the burst's first files stored")
                written_when_erased = burst.written
                erasures = services.erasures()
                assert isinstance(erasures, InProcessErasures)  # embedded: it runs here, where it is asked
                target = ErasureTarget(source_id=entry.id)
                receipt = await control.request_erasure(state, erasures, target, "ops")
                # The burst goes on while the erasure runs, and after it.
                await asyncio.gather(erasures.drain(), asyncio.sleep(BURST_S - (time.monotonic() - began)))
            written = burst.written
            await asyncio.sleep(SETTLE_S)  # the watcher's last debounced syncs after the burst
            left = await source_items(services.engine(), entry.id)
            (folder / "late.md").write_text("# late\n\nwritten after the erasure settled\n")
            await asyncio.sleep(SETTLE_S)
            left_after = await source_items(services.engine(), entry.id)
            done = state.get_erasure(receipt.id)
            residue = (state.get_source(entry.id), _committed(state, entry.id), state.dead_letters(entry.id))
        alive = up.poll() is None
    finally:
        os.killpg(up.pid, signal.SIGINT)
        up.communicate(timeout=60)

    figures(
        f"items of the source left: {left} after the burst, {left_after} after a later write; erasure "
        f"{done.status if done else None}, verified {erased_cleanly(done)}; files written in the burst: {written} "
        f"({written_when_erased} before the erasure); `tinymemory up` alive: {alive}"
    )
    assert 0 < written_when_erased < written, "the erasure did not land during the burst: the test proves little"
    assert (left, left_after) == (0, 0)
    assert erased_cleanly(done), done
    assert residue == (None, 0, [])
    assert alive
