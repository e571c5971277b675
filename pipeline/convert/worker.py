"""The body of a `ConverterPool` worker process: a memory ceiling, one chain, then jobs until told to stop.

A worker converts one document at a time and answers every job, unless it runs out of memory (it exits with
`EXIT_OUT_OF_MEMORY` so the parent can name the ceiling) or crashes or hangs (the parent sees that and
replaces it). Nothing a document does can reach the parent except the reply's JSON.
"""

from __future__ import annotations

import importlib
import os
import resource
import signal
import warnings
from collections.abc import Callable
from multiprocessing.connection import Connection

from engines.contract import EngineError, Error
from pipeline.convert.chain import ConverterChain, convert_document
from pipeline.convert.documents import RawDocument
from pipeline.convert.failures import describe
from pipeline.convert.limits import ConvertLimits
from pipeline.convert.messages import Failed, Ready, Stop, done, failed, read_request

EXIT_OUT_OF_MEMORY = 86

ChainFactory = Callable[[ConvertLimits], ConverterChain]

# Numerical libraries pulled in by the spreadsheet readers start one thread per core at import, each with
# its own reserved address space; a converter needs none of them, and they would eat the memory ceiling.
_SINGLE_THREADED = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def serve(conn: Connection, limits: ConvertLimits, chain_factory: str) -> None:
    """Run as a worker: confine this process, build the chain, then answer jobs from `conn` until told to stop.

    The memory ceiling is set before the chain's libraries are imported, so they count against it too.
    """
    _confine(limits)
    try:
        chain = load_chain_factory(chain_factory)(limits)
    except MemoryError:
        os._exit(EXIT_OUT_OF_MEMORY)
    except Exception as exc:
        start_failure = failed(EngineError(f"the converter worker could not start ({describe(exc)})"))
        conn.send_bytes(start_failure.model_dump_json().encode())
        return
    conn.send_bytes(Ready(pid=os.getpid()).model_dump_json().encode())
    while (raw := _next_job(conn)) is not None:
        conn.send_bytes(_answer(chain, raw, limits))


def load_chain_factory(path: str) -> ChainFactory:
    """The callable named by `module:attribute`, which builds a worker's chain from its limits."""
    module_name, _, attribute = path.partition(":")
    factory = getattr(importlib.import_module(module_name), attribute)
    if not callable(factory):
        raise TypeError(f"{path} is not callable")
    chain_factory: ChainFactory = factory
    return chain_factory


def _confine(limits: ConvertLimits) -> None:
    # This is a fresh interpreter of our own (spawned), so setting its environment here is its start-up edge.
    for name in _SINGLE_THREADED:
        os.environ[name] = "1"
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    soft = limits.memory_bytes if hard == resource.RLIM_INFINITY else min(limits.memory_bytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    # A crash on a hostile file must not leave a core dump holding the document's contents on disk.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Ctrl-C in a terminal reaches the whole process group; the parent decides when workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Library warnings about odd documents would flood the parent's log; the outcome is in the reply.
    warnings.simplefilter("ignore")


def _next_job(conn: Connection) -> RawDocument | None:
    """The next document to convert, or None when the parent said stop or went away."""
    try:
        request = read_request(conn.recv_bytes())
        if isinstance(request, Stop):
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
