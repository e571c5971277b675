"""`tinymemory import-legacy` end to end, as a process: killed mid-import (SIGKILL) then run again, it ends
with exactly the items of an uninterrupted import; run once more it is all replays; and the workspace,
made read-only, is never written. The same kill while a helper process reads the workspace leaves no helper
behind and resumes as exactly."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from engines.contract import ListRequest, MetaFilter
from engines.local import LocalEngine
from pipeline.legacy import LegacyWorkspace, prepared_items
from tests.fixtures.legacy_workspace import freeze, generated_workspace, sample_workspace, snapshot
from tinymemory_ingest.cli.import_legacy import add_legacy_commands

pytestmark = pytest.mark.e2e

ROWS = 2_400

# The real command line, with the legacy commands added when this build's app does not register them yet.
LAUNCH = """
from tinymemory_ingest.cli.main import app
from tinymemory_ingest.cli.import_legacy import add_legacy_commands
if not any(command.name == "import-legacy" for command in app.registered_commands):
    add_legacy_commands(app)
app()
"""


# The import job as the command runs it, with a helper process at any size, into an engine slowed to 0.1 s a batch
# so that the kill comes once the helper reads (it starts within a fraction of a second).
HELPED = """
import asyncio, sys
from pathlib import Path
from engines.local import LocalEngine
from pipeline.legacy import LegacyWorkspace, prepared_items
from tests.conformance.delegating import DelegatingEngine
from worker.legacy.job import LegacyImportRequest, LegacyImports, LegacyImportSettings, import_legacy

class Slow(DelegatingEngine):
    async def store_many(self, items):
        await asyncio.sleep(0.1)
        return await self.inner.store_many(items)

async def main(workspace, data):
    engine = LocalEngine(data / "memory.sqlite3")
    try:
        request = LegacyImportRequest(path=workspace)
        settings = LegacyImportSettings(helper_from=0)
        await import_legacy(request, Slow(engine), "local", LegacyImports(data), settings=settings)
    finally:
        engine.close()

asyncio.run(main(sys.argv[1], Path(sys.argv[2])))
"""


def tinymemory(*args: str, data_dir: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "TINYMEMORY_DATA_DIR": str(data_dir), "COLUMNS": "200"}
    command = [sys.executable, "-c", LAUNCH, *args]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finished(child: subprocess.Popen[str], timeout_s: float = 120) -> dict[str, Any]:
    out, err = child.communicate(timeout=timeout_s)
    assert child.returncode == 0, err
    record: dict[str, Any] = json.loads(out)
    return record


def record_file(data_dir: Path) -> Path | None:
    found = list((data_dir / "legacy-imports").glob("*.json"))
    return found[0] if found else None


def batches_saved(data_dir: Path) -> int:
    path = record_file(data_dir)
    if path is None:
        return 0
    try:
        return int(json.loads(path.read_text())["batches"])
    except (OSError, ValueError):  # between its write and its rename
        return 0


def held(data_dir: Path) -> dict[str, str]:
    """Every item in the data directory's local engine: id → wire JSON."""

    async def read() -> dict[str, str]:
        engine = LocalEngine(data_dir / "memory.sqlite3")
        found: dict[str, str] = {}
        cursor = None
        try:
            while True:
                page = await engine.export(ListRequest(limit=500, cursor=cursor, filter=MetaFilter()))
                found.update((entry.id, entry.item.wire_json()) for entry in page.items)
                if page.next_cursor is None:
                    return found
                cursor = page.next_cursor
        finally:
            engine.close()

    return asyncio.run(read())


def import_here(workspace: Path, data_dir: Path, *args: str) -> dict[str, Any]:
    """The command run in this process (what its process runs, without the start-up)."""
    result = CliRunner().invoke(legacy_app(), ["import-legacy", str(workspace), "--json", *args], env=env(data_dir))
    assert result.exit_code == 0, result.output
    record: dict[str, Any] = json.loads(result.stdout)
    return record


def legacy_app() -> typer.Typer:
    app = typer.Typer()
    app.callback()(lambda: None)
    add_legacy_commands(app)
    return app


def env(data_dir: Path) -> dict[str, str]:
    return {"TINYMEMORY_DATA_DIR": str(data_dir), "COLUMNS": "200"}


def test_killed_mid_import_then_resumed_holds_exactly_the_items_of_an_uninterrupted_one(tmp_path: Path) -> None:
    ws = generated_workspace(tmp_path / "v1", ROWS)
    frozen = freeze(ws)

    whole = import_here(ws.root, tmp_path / "whole")
    assert whole["status"] == "completed" and whole["stored"] > 1_000 and whole["replayed"] == 0
    expected = held(tmp_path / "whole")
    assert len(expected) == whole["stored"]

    data = tmp_path / "killed"
    child = tinymemory("import-legacy", str(ws.root), "--json", data_dir=data)
    deadline = time.monotonic() + 60
    while child.poll() is None and batches_saved(data) < 3 and time.monotonic() < deadline:
        time.sleep(0.005)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=30)
    path = record_file(data)
    assert path is not None
    interrupted = json.loads(path.read_text())
    assert interrupted["status"] == "running", "the import ended before it could be killed"
    assert 0 < interrupted["stored"] < whole["stored"]

    resumed = finished(tinymemory("import-legacy", str(ws.root), "--json", data_dir=data))
    assert resumed["status"] == "completed" and resumed["runs"] == 2
    # Resuming re-sends at most the batch the kill interrupted, which the engine may have stored before the
    # record said so: then those items come back as replays. Nothing else is sent twice.
    assert 0 <= whole["stored"] - resumed["stored"] <= resumed["replayed"] <= 100
    assert resumed["checkpoint"] == whole["checkpoint"]
    assert held(data) == expected

    again = import_here(ws.root, data)
    assert (again["stored"], again["replayed"], again["runs"]) == (0, whole["stored"], 3)
    assert held(data) == expected

    assert snapshot(ws) == frozen


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            parent = int(entry.joinpath("stat").read_text().rsplit(")", 1)[1].split()[1]) if entry.name.isdigit() else 0
        except (OSError, IndexError, ValueError):  # gone meanwhile
            continue
        if parent == pid:
            found.append(int(entry.name))
    return found


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_killed_while_a_helper_process_reads_leaves_no_helper_and_resumes_exactly(tmp_path: Path) -> None:
    ws = generated_workspace(tmp_path / "v1", ROWS)  # 18 batches: the helper reads from about the eighth
    with LegacyWorkspace.open(ws.root) as opened:
        expected = {item.fingerprint(): item.wire_json() for item in prepared_items(opened)}

    data = tmp_path / "killed"
    child = subprocess.Popen([sys.executable, "-c", HELPED, str(ws.root), str(data)], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while child.poll() is None and batches_saved(data) < 12 and time.monotonic() < deadline:
        time.sleep(0.01)
    helpers = children(child.pid)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=30)
    assert helpers, "no helper process was running"
    deadline = time.monotonic() + 30
    while not all(gone(pid) for pid in helpers):
        assert time.monotonic() < deadline, "the helper process outlived the killed import"
        time.sleep(0.01)
    path = record_file(data)
    assert path is not None and json.loads(path.read_text())["status"] == "running"

    resumed = import_here(ws.root, data)
    assert resumed["status"] == "completed" and resumed["runs"] == 2
    assert 0 <= len(expected) - resumed["stored"] <= resumed["replayed"] <= 100
    assert held(data) == expected


def test_restart_ignores_the_checkpoint(tmp_path: Path) -> None:
    ws = generated_workspace(tmp_path / "v1", 400)
    first = import_here(ws.root, tmp_path / "data")
    record = record_file(tmp_path / "data")
    assert record is not None
    stopped = {**json.loads(record.read_text()), "status": "failed"}  # as a run that stopped at its end leaves it
    record.write_text(json.dumps(stopped))
    assert import_here(ws.root, tmp_path / "data")["batches"] == first["batches"]  # resumed at the end: no batch
    restarted = import_here(ws.root, tmp_path / "data", "--restart")
    assert (restarted["stored"], restarted["replayed"], restarted["batches"]) == (0, first["stored"], first["batches"])


def test_the_summary_names_skipped_rows_and_a_bad_path_is_one_line(tmp_path: Path) -> None:
    ws = sample_workspace(tmp_path / "v1")
    runner = CliRunner()
    result = runner.invoke(legacy_app(), ["import-legacy", str(ws.root)], env=env(tmp_path / "data"))
    assert result.exit_code == 0, result.output
    assert "17 items stored, 0 replayed; 10 rows skipped" in result.stderr
    assert "skipped 2 × chunks: blank content" in result.stderr
    assert "skipped 1 × documents: event namespace, not imported" in result.stderr

    status = runner.invoke(legacy_app(), ["import-legacy-status"], env=env(tmp_path / "data"))
    assert status.exit_code == 0 and " completed " in status.stderr and "17 stored" in status.stderr

    result = runner.invoke(legacy_app(), ["import-legacy", str(tmp_path)], env=env(tmp_path / "data"))
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {tmp_path} is not a v1 workspace: memory/memory.db is missing"
    ]
