"""What a `ConverterPool` and its worker processes say to each other over their connection.

The parent sends a `Setup` first and the worker greets with `Ready` (or `Failed`, when it cannot start); then
each `Job` gets one `Done` or `Failed`, after a `Page` for each page read by OCR on the way (so the parent's
clock runs per page). Closing the connection tells a worker to exit.

Both directions are JSON read back through pydantic, never pickle: a worker parses hostile files, and a
worker subverted by one must not be able to run code in the parent by what it sends back. The document's
bytes travel as a second, raw message after the job's header, so they are neither copied into JSON nor
base64-encoded.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from engines.contract import Error, ErrorKind, error_for
from pipeline.convert.documents import ConvertedDocument, RawDocument
from pipeline.convert.limits import ConvertLimits
from pipeline.sniff import DocumentFormat


class _Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Setup(_Message):
    """Parent to worker, first: the limits every conversion runs under, and what builds the worker's chain."""

    kind: Literal["setup"] = "setup"
    limits: ConvertLimits
    chain_factory: str


class Job(_Message):
    """Parent to worker: convert the document whose bytes follow in the next message."""

    kind: Literal["job"] = "job"
    filename: str | None
    mime: str | None
    origin: str | None


class Ready(_Message):
    """Worker to parent, once: the libraries are imported and the worker takes jobs."""

    kind: Literal["ready"] = "ready"
    pid: int


class Done(_Message):
    """Worker to parent: the converted document."""

    kind: Literal["done"] = "done"
    markdown: str
    title: str | None
    format: DocumentFormat
    language: str | None
    source_size: int
    metadata: dict[str, str]


class Page(_Message):
    """Worker to parent, while converting: one more page was read by OCR (the job is alive)."""

    kind: Literal["page"] = "page"


class Failed(_Message):
    """Worker to parent: the contract error the conversion (or the worker's start) raised."""

    kind: Literal["failed"] = "failed"
    error: ErrorKind
    message: str


Request = Annotated[Setup | Job, Field(discriminator="kind")]
Reply = Annotated[Ready | Done | Page | Failed, Field(discriminator="kind")]
_REQUESTS: TypeAdapter[Setup | Job] = TypeAdapter(Request)
_REPLIES: TypeAdapter[Ready | Done | Page | Failed] = TypeAdapter(Reply)


def job_for(raw: RawDocument) -> Job:
    """The header sent ahead of `raw.data`."""
    return Job(filename=raw.filename, mime=raw.mime, origin=raw.origin)


def read_request(payload: bytes) -> Setup | Job:
    """A request from its JSON; raises `ValueError` (pydantic's `ValidationError`) on anything else."""
    return _REQUESTS.validate_json(payload)


def read_reply(payload: bytes) -> Ready | Done | Page | Failed:
    """A reply from its JSON; raises `ValueError` (pydantic's `ValidationError`) on anything else."""
    return _REPLIES.validate_json(payload)


def done(document: ConvertedDocument) -> Done:
    """The reply carrying `document`."""
    return Done(
        markdown=document.markdown,
        title=document.title,
        format=document.format,
        language=document.language,
        source_size=document.source_size,
        metadata=document.metadata,
    )


def failed(error: Error) -> Failed:
    """The reply carrying `error`."""
    return Failed(error=error.kind, message=error.message)


def document_of(reply: Done) -> ConvertedDocument:
    """The document a `Done` reply carries."""
    return ConvertedDocument(
        markdown=reply.markdown,
        title=reply.title,
        format=reply.format,
        language=reply.language,
        source_size=reply.source_size,
        metadata=dict(reply.metadata),
    )


def error_of(reply: Failed) -> Error:
    """The contract error a `Failed` reply carries."""
    return error_for(reply.error, reply.message)
