"""What a pool process this runtime spawns runs first, kept apart so that little is imported before it runs.

A spawned process unpickles its initializer before anything else; naming one in a module of the `worker`
package whose imports are light means Ctrl-C is ignored almost from the start, instead of landing in the
middle of importing the pipeline (and printing a traceback for an interrupt the parent handles anyway).
"""

from __future__ import annotations

import os
import signal
import threading
import time

_PARENT_POLL_S = 0.2


def start_pool_process(parent: int) -> None:
    """Worker start-up: leave Ctrl-C to the parent, and exit when the parent is gone (killed, say).

    Ctrl-C reaches the whole process group; the parent stops its pools in order, so a worker
    interrupted on its own would only print a traceback. And a pool worker waits on a queue it
    also holds the writing end of, so it would never see its parent die: it would live on,
    holding the parent's standard output open.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_PARENT_POLL_S)
        os._exit(0)

    threading.Thread(target=watch, name="tm-follow-parent", daemon=True).start()
