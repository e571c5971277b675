"""What every child process does first, in the child: the start-up `ChildProcess` gives a fresh interpreter.

The parent's `python -c` line ignores SIGINT before anything else, puts the parent's import path in front and
calls `main`, which confines the process (no core dumps, the memory ceiling if one was asked for), starts
watching the parent, then imports the target and calls it with the connection. All of this happens before the
target's module is imported, so its imports run under the ceiling too.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import resource
import sys
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import suppress
from multiprocessing.connection import Connection
from typing import Any

EXIT_OUT_OF_MEMORY = 86
"""The exit code of a child that ran out of its memory ceiling, so that its parent can name the ceiling."""

PARENT_POLL_S = 0.2
# The watch only sleeps and compares; the default 8 MiB stack would count against a memory ceiling for nothing.
_WATCH_STACK_BYTES = 128 * 1024
# glibc's mallopt parameter for the number of malloc arenas (malloc.h).
_M_ARENA_MAX = -8


def main() -> None:
    """The child's entry, run by the parent's `python -c` line; argv: path, fd, parent pid, target, ceiling."""
    fd, parent, target, ceiling = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    confine(int(ceiling) if ceiling else None)
    follow_parent(parent)
    conn = Connection(fd)
    code = run(target, conn)
    # Exit here and now, without the interpreter's shutdown, and holding `conn` until then: the connection closes
    # as the process ends, so a parent that sees it close and then kills the child (to reap it) still reads the
    # exit code it chose.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run(target: str, conn: Connection) -> int:
    """Call the function named by `target` with `conn`; the exit code its end calls for."""
    try:
        serve: Callable[[Connection], None] = load_named(target)
        serve(conn)
    except MemoryError:
        return EXIT_OUT_OF_MEMORY  # whatever is left of the heap is suspect: exit, naming the ceiling
    except (EOFError, BrokenPipeError, ConnectionResetError):
        return 0  # the parent closed the connection, or is gone: the child's work is over
    except SystemExit as leaving:
        return leaving.code if isinstance(leaving.code, int) else 1
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def confine(memory_bytes: int | None) -> None:
    """No core dumps, and with `memory_bytes`, an address-space ceiling of that many bytes."""
    # A crash must not leave a core dump holding what the child worked on (a document, a workspace's rows).
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_bytes is None:
        return
    _one_arena()
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    soft = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _one_arena() -> None:
    # glibc reserves 64 MiB of address space for each thread's own malloc arena, and the ceiling counts it: the
    # parent watch alone would take a sixteenth of 1 GiB. One arena for every thread leaves the ceiling to the
    # work. Another C library has no such arenas (and no `mallopt`).
    with suppress(OSError, AttributeError):
        ctypes.CDLL(None).mallopt(_M_ARENA_MAX, 1)


def follow_parent(parent: int) -> None:
    """Exit as soon as `parent` is no longer this process's parent (it died, killed or not).

    A child blocked on its connection sees the parent go by the end of it; one busy with a hung parser would
    never look, and would live on holding the parent's standard output open.
    """

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(0)

    previous = threading.stack_size(_WATCH_STACK_BYTES)
    try:
        threading.Thread(target=watch, name="tm-follow-parent", daemon=True).start()
    finally:
        threading.stack_size(previous)


def load_named(path: str) -> Any:
    """The callable named by `module:attribute`, its module imported; `TypeError` when it is not callable.

    Typed `Any` so that the caller states what it expects: a child's target takes its connection.
    """
    module_name, _, attribute = path.partition(":")
    named = getattr(importlib.import_module(module_name), attribute)
    if not callable(named):
        raise TypeError(f"{path} is not callable")
    return named
