"""`ProcessSlot`: a child started on demand and greeted, kept while it lives, replaced after it died, reaped when a
handshake fails, stopped or killed on close."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from pipeline.processes import ChildProcess, ChildSpec, ProcessSlot, SlotClosed
from tests.fixtures.processes import alive, wait_gone
from tests.unit.pipeline.processes.children import OBEY

READY_S = 30.0
SPEC = ChildSpec(OBEY)


class RefusedError(Exception):
    """The handshake's refusal."""


def greet(child: ChildProcess) -> None:
    assert child.receive(READY_S) == b"ready"


def refuse(child: ChildProcess) -> None:
    raise RefusedError(child.pid)


def wait_reapable(pid: int) -> None:
    """Wait until our child `pid` has exited entirely (every thread of it), without reaping it."""
    deadline = time.monotonic() + READY_S
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        assert time.monotonic() < deadline, f"process {pid} is still running"
        time.sleep(0.01)


def test_a_child_starts_when_first_needed_and_stays() -> None:
    slot = ProcessSlot(SPEC, greet)
    assert slot.pid is None and slot.live() is None
    child = slot.child()
    assert slot.child() is child and slot.live() is child and slot.pid == child.pid
    slot.close()
    assert wait_gone([child.pid]) == []


def test_a_dead_child_is_replaced_and_a_discarded_one_reaped() -> None:
    slot = ProcessSlot(SPEC, greet)
    first = slot.child()
    os.kill(first.pid, signal.SIGKILL)
    wait_reapable(first.pid)
    second = slot.child()
    assert second.pid != first.pid
    assert slot.discard() == -signal.SIGKILL
    assert slot.pid is None and not alive(second.pid)
    assert slot.discard() is None  # nothing left to discard
    slot.close()


def test_a_failed_handshake_leaves_no_process() -> None:
    slot = ProcessSlot(SPEC, refuse)
    with pytest.raises(RefusedError) as refused:
        slot.child()
    (pid,) = refused.value.args
    assert not alive(pid) and slot.pid is None


def test_closing_stops_an_idle_child_and_refuses_more() -> None:
    slot = ProcessSlot(SPEC, greet)
    pid = slot.child().pid
    slot.close()
    assert not alive(pid)
    with pytest.raises(SlotClosed), slot.held():
        pass
    with pytest.raises(SlotClosed):
        slot.child()


def test_closing_kills_a_child_in_use_and_its_user_sees_it_hang_up() -> None:
    slot = ProcessSlot(SPEC, greet)
    outcome: list[BaseException] = []

    def use() -> None:
        with slot.held():
            child = slot.child()
            child.send(b"hang")
            try:
                child.receive(READY_S)
            except EOFError as hung_up:
                outcome.append(hung_up)

    user = threading.Thread(target=use)
    user.start()
    while slot.pid is None:
        time.sleep(0.01)
    pid = slot.pid
    time.sleep(0.2)
    slot.close()
    user.join(READY_S)
    assert len(outcome) == 1 and isinstance(outcome[0], EOFError)
    assert not alive(pid) and slot.pid is None  # reaped as its user let go
