"""Killable child processes: the one way this project runs work in a process of its own.

    ChildProcess.start(ChildSpec("package.module:serve", memory_bytes=...))   a fresh interpreter, its connection
    ProcessSlot(spec, handshake)     at most one live child, started on demand, greeted, replaced after a failure

A child is `python -c` running the named function with a duplex connection; before the function's module is
imported it ignores SIGINT, dumps no core, takes its memory ceiling and watches its parent, exiting when the
parent dies (`startup`). The parent sends and receives bytes, with a deadline where it wants one, kills and
reaps, and tells how a child ended with `exit_story`. The converter pool, the text pool and the legacy import's
helper are built on it.
"""

from pipeline.processes.child import REAP_S, ChildProcess, ChildSpec, exit_story
from pipeline.processes.slot import STOP_GRACE_S, Handshake, ProcessSlot, SlotClosed
from pipeline.processes.startup import EXIT_OUT_OF_MEMORY, load_named

__all__ = [
    "EXIT_OUT_OF_MEMORY",
    "REAP_S",
    "STOP_GRACE_S",
    "ChildProcess",
    "ChildSpec",
    "Handshake",
    "ProcessSlot",
    "SlotClosed",
    "exit_story",
    "load_named",
]
