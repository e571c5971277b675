"""Scans become searchable, end to end through the commands a user runs: `tinymemory ingest` on a folder holding a
scanned letter, a three-page image-only PDF, a photograph, a ZIP with a JPEG inside, a decompression bomb and a
truncated JPEG; then `tinymemory fetch` finds each scanned word on its page, the letter's telephone number
scrubbed, the photograph skipped with its reason, and the two hostile files dead-lettered naming why."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.scans import bomb_png, image_bytes, needs_ocr, noise_png, page_image, truncated_jpeg

pytestmark = [pytest.mark.e2e, needs_ocr]

TINYMEMORY = Path(sys.executable).with_name("tinymemory")
# Each page of the scan holds one rare word and enough ordinary text to be a search passage of its own.
FILLER = "The committee reviewed the minutes of the previous meeting and agreed the schedule for the spring."
PAGE_WORDS = ["quokkafruit", "brambleweir", "copperkettle"]


def _scan_pages() -> list[Any]:
    return [page_image([f"Item {word} noted for the record.", *[FILLER] * 24], size=28) for word in PAGE_WORDS]


def _folder(root: Path) -> Path:
    notes = root / "notes"
    notes.mkdir()
    letter = ["Dear Alice, the glazing kiln is repaired.", "Call the workshop on +44 20 7946 0958 before noon."]
    (notes / "letter.png").write_bytes(image_bytes([page_image(letter)], "PNG"))
    (notes / "minutes.pdf").write_bytes(image_bytes(_scan_pages(), "PDF"))
    (notes / "photo.png").write_bytes(noise_png())
    (notes / "huge.png").write_bytes(bomb_png())
    (notes / "cut.jpg").write_bytes(truncated_jpeg())
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(
            "receipts/till.jpg", image_bytes([page_image(["Receipt for one otterwhistle, paid in cash."])], "JPEG")
        )
    (notes / "receipts.zip").write_bytes(archive.getvalue())
    return notes


def _tinymemory(*args: str, env: dict[str, str]) -> Any:
    done = subprocess.run([str(TINYMEMORY), *args, "--json"], env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout)


def test_scans_and_images_are_read_scrubbed_and_found_on_their_pages(tmp_path: Path) -> None:
    notes = _folder(tmp_path)
    env = {**os.environ, "TINYMEMORY_DATA_DIR": str(tmp_path / "data")}
    summary = _tinymemory("ingest", str(notes), "--no-wait-vectors", env=env)
    assert summary["files_changed"] == 6  # the archive's member is the unit, not the archive
    assert [line.split(":")[0] for line in summary["files_without_text"]] == ["photo.png"]
    assert summary["errors"] == 2  # the bomb and the truncated JPEG

    for page, word in enumerate(PAGE_WORDS, start=1):
        hits = _tinymemory("fetch", word, "--mode", "keyword", env=env)["hits"]
        assert [Path(hit["meta"]["file_path"]).name for hit in hits] == ["minutes.pdf"], word
        assert f"page:{page}" in hits[0]["meta"]["tags"], hits[0]["meta"]["tags"]

    (letter,) = _tinymemory("fetch", "glazing kiln", "--mode", "keyword", env=env)["hits"]
    assert "[REDACTED_PII_PHONE]" in letter["text"] and "7946" not in letter["text"]
    (receipt,) = _tinymemory("fetch", "otterwhistle", "--mode", "keyword", env=env)["hits"]
    assert receipt["meta"]["file_path"].endswith("receipts.zip!/receipts/till.jpg")

    letters = subprocess.run(
        [str(TINYMEMORY), "dlq", "list", "--json"], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    reasons = {Path(letter["unit_id"]).name: letter["message"] for letter in json.loads(letters.stdout)}
    assert set(reasons) == {"huge.png", "cut.jpg"}
    assert "100,000,000 pixels, the limit (ocr.max_pixels)" in reasons["huge.png"]
    assert "the file ends before the image does" in reasons["cut.jpg"]


def test_a_language_not_installed_stops_the_command_at_start_with_what_to_install(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# A\n")
    env = {**os.environ, "TINYMEMORY_DATA_DIR": str(tmp_path / "data"), "TINYMEMORY_OCR__LANGUAGES": '["eng", "qqq"]'}
    for command in (["ingest", str(notes)], ["worker", "--queues", "tm.ingest"]):
        done = subprocess.run([str(TINYMEMORY), *command], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, command
        assert "OCR language qqq is not installed" in done.stderr and "apt-get install tesseract-ocr-qqq" in done.stderr
        assert "Traceback" not in done.stderr
