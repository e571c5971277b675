"""Targets for the children the `pipeline.processes` tests start (each named as `module:function`).

echo      greets with `ready`, then sends every message back until the connection closes
report    sends what the start-up did, as JSON: SIGINT, core dumps, memory ceiling, main module, parent
obey      greets, then per message: `exit <code>`, `alloc <MiB>`, `hang`, or anything else sent back
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time
from multiprocessing.connection import Connection

PACKAGE = "tests.unit.pipeline.processes.children"
ECHO = f"{PACKAGE}:echo"
REPORT = f"{PACKAGE}:report"
OBEY = f"{PACKAGE}:obey"


def echo(conn: Connection) -> None:
    conn.send_bytes(b"ready")
    while True:
        conn.send_bytes(conn.recv_bytes())


def report(conn: Connection) -> None:
    conn.send_bytes(
        json.dumps(
            {
                "sigint_ignored": signal.getsignal(signal.SIGINT) == signal.SIG_IGN,
                "core": resource.getrlimit(resource.RLIMIT_CORE)[0],
                "address_space": resource.getrlimit(resource.RLIMIT_AS)[0],
                # `multiprocessing` names the main module `__mp_main__` too; spawn would import the parent's there.
                "main_files": [
                    getattr(sys.modules.get(name), "__file__", None) for name in ("__main__", "__mp_main__")
                ],
                "parent": os.getppid(),
                "threads": sorted(os.listdir("/proc/self/task")) != [str(os.getpid())],
            }
        ).encode()
    )


def obey(conn: Connection) -> None:
    conn.send_bytes(b"ready")
    while True:
        command, _, argument = conn.recv_bytes().decode().partition(" ")
        if command == "exit":
            os._exit(int(argument))
        elif command == "alloc":
            block = bytearray(int(argument) * 1024 * 1024)
            conn.send_bytes(str(len(block)).encode())
        elif command == "hang":
            time.sleep(3600)
        else:
            conn.send_bytes(command.encode())
