"""`tinymemory dev cortex-double`: a double in a process of its own, whose `--data` file outlives a restart."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engines.contract import Document, ListRequest
from engines.cortex import CortexEngine, CortexWire, Timing
from engines.settings import EngineCredential

pytestmark = pytest.mark.integration

# tinymemory_ingest/cli/main.py adds the group to `tinymemory`; this command line holds only the group, as a plugin
# would.
LAUNCH = (
    "import typer\n"
    "from tinymemory_ingest.cli.dev import add_dev_commands\n"
    "app = typer.Typer()\n"
    "app.callback()(lambda: None)\n"
    "add_dev_commands(app)\n"
    "app()\n"
)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start(port: int, data: Path) -> subprocess.Popen[str]:
    command = [sys.executable, "-c", LAUNCH, "dev", "cortex-double", "--port", str(port), "--data", str(data)]
    child = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return child
        except OSError:
            time.sleep(0.05)
    child.kill()
    raise AssertionError(f"the double never listened: {child.communicate()[0]}")


def _stop(child: subprocess.Popen[str]) -> str:
    os.killpg(child.pid, signal.SIGINT)
    out, _ = child.communicate(timeout=20)
    return out


async def _store_and_list(url: str, text: str | None) -> list[str]:
    engine = CortexEngine(CortexWire.DIRECT, url, EngineCredential.of("dev-key"), timing=Timing.fast())
    async with engine:
        if text is not None:
            await engine.store(Document.from_text(text))
        return [hit.text for hit in (await engine.list(ListRequest(limit=10))).items]


def test_a_restarted_double_keeps_its_log(tmp_path: Path) -> None:
    port, data = _free_port(), tmp_path / "double.jsonl"
    url = f"http://127.0.0.1:{port}"
    child = _start(port, data)
    try:
        assert asyncio.run(_store_and_list(url, "kept across a restart")) == ["kept across a restart"]
    finally:
        said = _stop(child)
    assert f"CortexDB double (direct) on {url}" in said and "Traceback" not in said
    child = _start(port, data)
    try:
        assert asyncio.run(_store_and_list(url, None)) == ["kept across a restart"]
    finally:
        _stop(child)


def test_a_bad_wire_is_refused() -> None:
    command = [sys.executable, "-c", LAUNCH, "dev", "cortex-double", "--wire", "both"]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 2 and "wire must be direct or hosted" in done.stderr
