"""Hostile files through the embedded runtime (the real converter and text pools, the local engine): each is
dead-lettered with its reason, or, where converting it is legitimate, stored within bounds; the sync ends in
time, the runtime goes on serving, and no process's peak RSS passes its bound."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from engines.contract import Hit
from tests.fixtures.documents import corrupt_pdf_bytes, zip_bomb_bytes
from tests.reliability.conftest import Figures, every_item
from tests.reliability.hostile import (
    MIB,
    ChildPeaks,
    headings_md,
    laughs_docx,
    laughs_svg,
    laughs_xml,
    reset_own_peak,
    vm_hwm,
    vm_rss,
)
from worker.control import ensure_local_source
from worker.embedded.runtime import EmbeddedRuntime
from worker.settings import Settings

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CONVERT_TIMEOUT_S = 10.0
MAX_FILE_MB = 25.0  # above the 20 MB file of newlines, so it is read, converted and chunked, not just refused
# Bounds on peak RSS. A converter process also lives under the pool's 1 GiB address-space ceiling.
CHILD_RSS_BOUND = 400 * MIB
# This process is the test runner: what it held before (the rest of a whole suite) is not the runtime's doing,
# so its growth during the sync is bounded, not its size.
OWN_RSS_BOUND = 400 * MIB
# The 4 MiB: 1,400 passages and 1.6 M tokens for the static embedder, stored in a few seconds.
HEADINGS_BYTES = 4 * MIB
SYNC_BOUND_S = 3 * CONVERT_TIMEOUT_S

# unit → where it must end: a dead letter at this stage with these words in its message, or "stored".
EXPECTED = {
    "bomb.xlsx": ("convert", "64 MiB"),
    "bomb.docx": ("convert", "64 MiB"),
    "broken.pdf": ("convert", "unreadable PDF"),
    "noise.bin": ("convert", "unrecognised bytes"),
    "sparse.log": ("list", "over the 25 MiB file limit"),
    "loop-a": ("list", "symbolic link"),
    "loop-b": ("list", "symbolic link"),
    "laughs.docx": ("convert", "unreadable docx"),
    "laughs.xml": ("stored", ""),
    "laughs.svg": ("stored", ""),
    "newlines.txt": ("convert", "produced no text"),
    "headings.md": ("stored", ""),
    "good.md": ("stored", ""),
}


def _plant(root: Path) -> dict[str, int]:
    """Write the hostile folder; each file's size."""
    root.mkdir()
    files = {
        "good.md": b"# Good\n\nthe dromedarian note\n",
        "bomb.xlsx": zip_bomb_bytes(),
        "bomb.docx": zip_bomb_bytes(kind="docx"),
        "broken.pdf": corrupt_pdf_bytes(),
        "noise.bin": os.urandom(1 * MIB),
        "laughs.xml": laughs_xml(),
        "laughs.svg": laughs_svg(),
        "laughs.docx": laughs_docx(),
        "newlines.txt": b"\n" * (20 * MIB),
        "headings.md": headings_md(HEADINGS_BYTES),
    }
    for name, data in files.items():
        (root / name).write_bytes(data)
    with (root / "sparse.log").open("wb") as sparse:
        sparse.truncate(2 * 1024**3)  # 2 GiB that cost no disk
    os.symlink(root / "loop-b", root / "loop-a")
    os.symlink(root / "loop-a", root / "loop-b")
    return {name: len(data) for name, data in files.items()}


def _stored_size(items: list[Hit]) -> str:
    return f"in {len(items)} item(s) of {sum(len(hit.text) for hit in items)} characters"


async def test_hostile_files_are_dead_lettered_or_bounded_and_the_runtime_lives(
    tmp_path: Path, figures: Figures
) -> None:
    root = tmp_path / "hostile"
    sizes = _plant(root)
    settings = Settings(
        data_dir=tmp_path / "data", convert_workers=1, convert_timeout_s=CONVERT_TIMEOUT_S, max_file_mb=MAX_FILE_MB
    )
    reset_own_peak()
    held_before = vm_rss()
    with EmbeddedRuntime(settings) as runtime, ChildPeaks() as children:
        entry = ensure_local_source(runtime.state, root)
        started = time.monotonic()
        await runtime.sync(entry.id)
        seconds = time.monotonic() - started
        # The runtime's peak, before this test reads every item back (a 4 MiB item read whole is the reader's).
        own = vm_hwm() - held_before
        letters = {d.unit_id: d for d in runtime.state.dead_letters(entry.id)}
        hits = await every_item(runtime.engine)
        # Still serving: a plain file added now is stored by the next sync.
        (root / "after.md").write_text("the sequel about quokkas\n")
        await runtime.sync(entry.id)
        after = await every_item(runtime.engine)

    stored: dict[str, list[Hit]] = {}
    for hit in hits:
        stored.setdefault(os.path.basename(hit.meta.file_path or ""), []).append(hit)
    ended = {name: ("stored", _stored_size(items)) for name, items in stored.items()}
    ended |= {name: (d.stage, d.message) for name, d in letters.items()}
    children_peak = f"{children.highest / MIB:.0f} MiB at most over {len(children.peaks)}"
    figures(
        f"dead letters: {len(letters)}; stored units: {len(stored)} in {len(hits)} items; sync {seconds:.1f} s "
        f"(bound {SYNC_BOUND_S:g} s); peak RSS: this process +{own / MIB:.0f} MiB (bound {OWN_RSS_BOUND // MIB}), "
        f"pool processes {children_peak} (bound {CHILD_RSS_BOUND // MIB})",
        *(f"{name}: {stage} {message}" for name, (stage, message) in sorted(ended.items())),
    )
    assert sorted(ended) == sorted(EXPECTED), ended
    for name, (stage, words) in EXPECTED.items():
        assert ended[name][0] == stage, (name, ended[name])
        assert words in ended[name][1], (name, ended[name])
    # What was stored is bounded by what the file held: no entity was expanded, nothing multiplied.
    for name, items in stored.items():
        assert sum(len(hit.text) for hit in items) <= max(sizes.get(name, 0), 1) * 2, name
    assert "&lol9;" in "".join(hit.text for hit in stored["laughs.xml"])
    assert {os.path.basename(h.meta.file_path or "") for h in after} == set(stored) | {"after.md"}
    assert seconds < SYNC_BOUND_S
    assert children.peaks and children.highest < CHILD_RSS_BOUND
    assert own < OWN_RSS_BOUND
