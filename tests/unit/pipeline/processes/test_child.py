"""`ChildProcess`: a fresh interpreter running a named function, its start-up, deadlines, hang-ups, kills and exit
stories, and a child outliving its parent by no more than a moment. Each test starts a child or two (about 0.1 s
of CPU each: they import only `pipeline.processes` and the small target module)."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from pipeline.processes import EXIT_OUT_OF_MEMORY, ChildProcess, ChildSpec, exit_story
from tests.fixtures.processes import alive, wait_gone
from tests.unit.pipeline.processes.children import ECHO, OBEY, REPORT

MIB = 1024 * 1024
READY_S = 30.0


@pytest.fixture
def obeying() -> Iterator[ChildProcess]:
    child = ChildProcess.start(ChildSpec(OBEY, memory_bytes=256 * MIB))
    assert child.receive(READY_S) == b"ready"
    yield child
    child.stop()


def test_a_child_runs_its_target_and_exits_when_its_connection_closes() -> None:
    child = ChildProcess.start(ChildSpec(ECHO))
    assert child.receive(READY_S) == b"ready"
    for message in (b"one", b"", bytes(range(256)) * 1000):
        child.send(message)
        assert child.receive(READY_S) == message
    assert child.alive()
    assert child.stop(grace=READY_S) == 0  # it saw the end of its connection and returned
    assert not child.alive()
    with pytest.raises(OSError):
        child.send(b"too late")


def test_the_start_up_runs_before_the_target() -> None:
    child = ChildProcess.start(ChildSpec(REPORT))
    report = json.loads(child.receive(READY_S))
    assert child.stop(grace=READY_S) == 0
    assert report["sigint_ignored"]  # Ctrl-C is the parent's
    assert report["core"] == 0  # no core dump holds what the child worked on
    assert report["address_space"] == resource.getrlimit(resource.RLIMIT_AS)[0]  # no ceiling asked for
    assert report["main_files"] == [None, None]  # the parent's main module was not imported: `-c` has no file
    assert report["parent"] == os.getpid()
    assert report["threads"]  # the parent watch


def test_a_memory_ceiling_is_set_and_running_out_of_it_is_told() -> None:
    child = ChildProcess.start(ChildSpec(REPORT, memory_bytes=300 * MIB))
    assert json.loads(child.receive(READY_S))["address_space"] == 300 * MIB
    child.stop(grace=READY_S)


def test_running_out_of_memory_exits_with_its_own_code(obeying: ChildProcess) -> None:
    obeying.send(b"alloc 16")
    assert obeying.receive(READY_S) == str(16 * MIB).encode()  # well under the ceiling: fine
    obeying.send(b"alloc 1024")
    with pytest.raises(EOFError):
        obeying.receive(READY_S)
    code = obeying.stop()
    assert code == EXIT_OUT_OF_MEMORY
    assert exit_story(code) == "ran out of memory"


def test_receiving_has_a_deadline_and_a_hung_child_is_killed(obeying: ChildProcess) -> None:
    obeying.send(b"hang")
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        obeying.receive(0.3)
    assert 0.3 <= time.monotonic() - started < 3
    code = obeying.stop()
    assert code == -signal.SIGKILL
    assert exit_story(code) == "was killed by SIGKILL"


def test_a_child_that_exits_hangs_up(obeying: ChildProcess) -> None:
    obeying.send(b"exit 3")
    with pytest.raises(EOFError):
        obeying.receive(READY_S)
    assert obeying.stop() == 3


def test_a_child_killed_with_a_message_unread_hangs_up_too(obeying: ChildProcess) -> None:
    obeying.send(b"hang")
    obeying.send(b"never read")
    os.kill(obeying.pid, signal.SIGKILL)
    with pytest.raises(EOFError):  # not a connection reset
        obeying.receive(READY_S)


def test_a_message_over_the_limit_is_refused(obeying: ChildProcess) -> None:
    obeying.send(b"x" * 2000)
    with pytest.raises(OSError) as refused:
        obeying.receive(READY_S, max_bytes=1000)
    assert not isinstance(refused.value, TimeoutError)


async def test_receiving_without_holding_up_the_event_loop(obeying: ChildProcess) -> None:
    obeying.send(b"ping")
    assert await obeying.areceive() == b"ping"


def test_a_child_whose_target_cannot_be_loaded_exits_with_an_error(capfd: pytest.CaptureFixture[str]) -> None:
    child = ChildProcess.start(ChildSpec("tests.unit.pipeline.processes.children:nothing_here"))
    with pytest.raises(EOFError):
        child.receive(READY_S)
    assert child.stop() == 1
    assert "AttributeError" in capfd.readouterr().err


def test_a_child_exits_when_its_parent_is_killed() -> None:
    # A parent that starts a child which never reads its connection again, so only the parent watch can end it.
    script = (
        "from pipeline.processes import ChildProcess, ChildSpec\n"
        f"child = ChildProcess.start(ChildSpec({OBEY!r}))\n"
        "assert child.receive(30) == b'ready'\n"
        "child.send(b'hang')\n"
        "print(child.pid, flush=True)\n"
        "input()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as parent:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        assert alive(pid)
        parent.kill()
        parent.wait(timeout=10)
    assert wait_gone([pid], within_s=5) == []


@pytest.mark.parametrize(
    ("code", "story"),
    [
        (0, "exited with code 0"),
        (3, "exited with code 3"),
        (EXIT_OUT_OF_MEMORY, "ran out of memory"),
        (-signal.SIGKILL, "was killed by SIGKILL"),
        (-signal.SIGABRT, "was killed by SIGABRT"),
        (-200, "was killed by signal 200"),
        (None, "stopped answering"),
    ],
)
def test_exit_stories(code: int | None, story: str) -> None:
    assert exit_story(code) == story
