"""One worker process of a `ConverterPool`: started on demand, given one job at a time, killed when it overruns.

The process itself is a `pipeline.processes.ProcessSlot`; this module speaks the pool's JSON to it and turns
what goes wrong (a start that fails, a job over the clock, a reply too big or unreadable, a death) into the
contract error that names the document and the limit.
"""

from __future__ import annotations

from engines.contract import EngineError, Error, InvalidRequestError
from pipeline.convert.documents import ConvertedDocument, RawDocument
from pipeline.convert.failures import describe
from pipeline.convert.limits import ConvertLimits, format_bytes, format_seconds
from pipeline.convert.messages import Done, Failed, Page, Ready, Setup, document_of, error_of, job_for, read_reply
from pipeline.convert.worker import TARGET
from pipeline.processes import EXIT_OUT_OF_MEMORY, ChildProcess, ChildSpec, ProcessSlot, SlotClosed, exit_story

# Importing the parsing libraries takes a second or two; a worker that is not ready by then is broken.
START_TIMEOUT_S = 60.0
_MAX_GREETING = 1 << 20


class WorkerProcess:
    """A worker slot: at most one live process, started lazily, replaced after any failure.

    Only one thread at a time may call `convert` (the pool hands each slot to one caller); `close` may come
    from any thread and kills a process that is still converting.
    """

    def __init__(self, limits: ConvertLimits, chain_factory: str) -> None:
        self._limits = limits
        self._setup = Setup(limits=limits, chain_factory=chain_factory).model_dump_json().encode()
        self._max_reply = 4 * max(limits.max_decompressed_bytes, limits.max_input_bytes)
        self._slot = ProcessSlot(ChildSpec(TARGET, memory_bytes=limits.memory_bytes), self._greet)

    @property
    def pid(self) -> int | None:
        """The live process's id; None before the first start and after a failure."""
        return self._slot.pid

    def convert(self, raw: RawDocument) -> ConvertedDocument:
        """`raw` converted by this slot's process, which is started or replaced as needed."""
        try:
            with self._slot.held():
                return self._exchange(raw)
        except SlotClosed:
            raise EngineError(f"{raw.label}: the converter pool is closed") from None

    def start(self) -> None:
        """Start the process now if it is not running; a failure to start is left for the next job."""
        try:
            self._child()
        except (Error, SlotClosed):
            return

    def close(self) -> None:
        """Stop the process: politely when idle, by SIGKILL when a conversion is still running."""
        self._slot.close()

    def _exchange(self, raw: RawDocument) -> ConvertedDocument:
        child = self._child()
        try:
            _send(child, raw)
        except OSError:
            # The process died while idle (killed from outside); nothing of this job reached it.
            self._slot.discard()
            child = self._child()
            _send(child, raw)
        # The clock restarts at each page a scan's reading reports: the limit holds per page for those.
        while (document := self._reply(self._receive(child, raw), raw)) is None:
            pass
        return document

    def _receive(self, child: ChildProcess, raw: RawDocument) -> bytes:
        try:
            return child.receive(self._limits.timeout_s, self._max_reply)
        except TimeoutError:
            self._slot.discard()
            raise InvalidRequestError(
                f"conversion of {raw.label} took longer than {format_seconds(self._limits.timeout_s)}"
            ) from None
        except EOFError:
            raise self._death(raw) from None
        except OSError as exc:
            self._slot.discard()
            raise EngineError(
                f"{raw.label}: the converter worker sent a reply over {format_bytes(self._max_reply)}"
            ) from exc

    def _reply(self, payload: bytes, raw: RawDocument) -> ConvertedDocument | None:
        """The document a reply carries, None for a page read on the way, or the error it stands for."""
        try:
            reply = read_reply(payload)
        except ValueError:
            reply = None
        if isinstance(reply, Page):
            return None
        if isinstance(reply, Done):
            return document_of(reply)
        if isinstance(reply, Failed):
            raise error_of(reply)
        self._slot.discard()
        raise EngineError(f"{raw.label}: the converter worker sent an unreadable reply and was replaced")

    def _death(self, raw: RawDocument) -> Error:
        """The error for a worker that hung up mid-job, after reaping it; its exit says which limit it hit."""
        exitcode = self._slot.discard()
        if exitcode == EXIT_OUT_OF_MEMORY:
            ceiling = format_bytes(self._limits.memory_bytes)
            return InvalidRequestError(f"conversion of {raw.label} ran out of its {ceiling} memory ceiling")
        replaced = "" if exitcode is None else " and was replaced"
        return EngineError(f"conversion of {raw.label} failed: its worker process {exit_story(exitcode)}{replaced}")

    def _child(self) -> ChildProcess:
        """The live process, started (and greeted) first when there is none or it died."""
        try:
            return self._slot.child()
        except OSError as exc:  # no process could start at all
            raise EngineError(f"the converter worker could not start ({describe(exc)})") from exc

    def _greet(self, child: ChildProcess) -> None:
        """Send the setup and wait for the greeting; the error that says why the worker cannot work."""
        try:
            child.send(self._setup)
        except OSError:
            raise self._start_failure() from None
        try:
            reply = read_reply(child.receive(START_TIMEOUT_S, _MAX_GREETING))
        except TimeoutError:
            raise EngineError(f"the converter worker did not start within {format_seconds(START_TIMEOUT_S)}") from None
        except EOFError:
            raise self._start_failure() from None
        except (OSError, ValueError):
            reply = None
        if isinstance(reply, Failed):
            raise error_of(reply)
        if not isinstance(reply, Ready):
            raise EngineError("the converter worker sent an unreadable greeting")

    def _start_failure(self) -> Error:
        # The slot reaps the process; the greeting's absence is enough to say what went wrong.
        ceiling = format_bytes(self._limits.memory_bytes)
        return EngineError(f"the converter worker exited while starting (is its {ceiling} memory ceiling too low?)")


def _send(child: ChildProcess, raw: RawDocument) -> None:
    child.send(job_for(raw).model_dump_json().encode())
    child.send(raw.data)
