"""The body of a `ConverterPool` worker process: its setup, one chain, then jobs until the connection closes.

The process is a child of `pipeline.processes`, which has already put it under its memory ceiling, turned off
Ctrl-C and core dumps, and made it follow its parent. A worker converts one document at a time and answers
every job, unless it runs out of memory (it exits with `EXIT_OUT_OF_MEMORY` so the parent can name the
ceiling) or crashes or hangs (the parent sees that and replaces it). Nothing a document does can reach the
parent except the reply's JSON.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from multiprocessing.connection import Connection

from engines.contract import EngineError, Error
from pipeline.convert.chain import ConverterChain, convert_document
from pipeline.convert.documents import RawDocument
from pipeline.convert.failures import describe
from pipeline.convert.limits import ConvertLimits
from pipeline.convert.messages import Failed, Job, Page, Ready, Setup, done, failed, read_request
from pipeline.convert.progress import on_page
from pipeline.processes import EXIT_OUT_OF_MEMORY, load_named

TARGET = "pipeline.convert.worker:serve"
"""What a converter worker process runs (a `ChildSpec` target)."""

ChainFactory = Callable[[ConvertLimits], ConverterChain]

# Numerical libraries pulled in by the spreadsheet readers start one thread per core at import, each with
# its own reserved address space; a converter needs none of them, and they would eat the memory ceiling.
_SINGLE_THREADED = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def serve(conn: Connection) -> None:
    """Run as a worker: take the setup, build the chain, greet, then answer jobs from `conn` until it closes.

    The chain's libraries are imported here, under the memory ceiling the process already has.
    """
    setup = read_request(conn.recv_bytes())
    if not isinstance(setup, Setup):
        return
    _quiet()
    try:
        factory: ChainFactory = load_named(setup.chain_factory)
        chain = factory(setup.limits)
    except MemoryError:
        os._exit(EXIT_OUT_OF_MEMORY)
    except Exception as exc:
        start_failure = failed(EngineError(f"the converter worker could not start ({describe(exc)})"))
        conn.send_bytes(start_failure.model_dump_json().encode())
        return
    conn.send_bytes(Ready(pid=os.getpid()).model_dump_json().encode())
    page = Page().model_dump_json().encode()
    on_page(lambda: conn.send_bytes(page))
    while (raw := _next_job(conn)) is not None:
        conn.send_bytes(_answer(chain, raw, setup.limits))


def _quiet() -> None:
    # This is a fresh interpreter of our own, so setting its environment here is its start-up edge.
    for name in _SINGLE_THREADED:
        os.environ[name] = "1"
    # Library warnings about odd documents would flood the parent's log; the outcome is in the reply.
    warnings.simplefilter("ignore")


def _next_job(conn: Connection) -> RawDocument | None:
    """The next document to convert, or None when the parent closed the connection or went away."""
    try:
        request = read_request(conn.recv_bytes())
        if not isinstance(request, Job):
            return None
        data = conn.recv_bytes()
    except (EOFError, OSError, ValueError):
        return None
    return RawDocument(data=data, filename=request.filename, mime=request.mime, origin=request.origin)


def _answer(chain: ConverterChain, raw: RawDocument, limits: ConvertLimits) -> bytes:
    reply: Failed | None = None
    try:
        return done(convert_document(raw, limits, chain)).model_dump_json().encode()
    except MemoryError:
        # Whatever is left of the heap is suspect; exit so the parent replaces this worker and names the limit.
        os._exit(EXIT_OUT_OF_MEMORY)
    except Error as err:
        reply = failed(err)
    except Exception as exc:
        reply = failed(EngineError(f"{raw.label}: conversion failed in the worker ({describe(exc)})"))
    return reply.model_dump_json().encode()
