"""Structured logs: one JSON object a line, each carrying the source, batch and run it concerns.

Jobs set the fields once (`with job_fields(source_id=...)`); every record logged inside, by any
module, carries them, because a filter copies them from context variables onto the record.
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

_FIELDS: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("tinymemory_log_fields", default=None)


@contextmanager
def job_fields(**fields: str | None) -> Iterator[None]:
    """Attach these fields (those not None) to every record logged inside the block."""
    merged = {**(_FIELDS.get() or {}), **{k: v for k, v in fields.items() if v is not None}}
    token = _FIELDS.set(merged)
    try:
        yield
    finally:
        _FIELDS.reset(token)


class JobFieldsFilter(logging.Filter):
    """Copies the current job's fields onto each record (as `record.job`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.job = dict(_FIELDS.get() or {})
        return True


class JsonFormatter(logging.Formatter):
    """`{"at", "level", "logger", "message", ...job fields, "error"?}` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "at": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(getattr(record, "job", {}))
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def configure(json_lines: bool, level: int = logging.INFO) -> None:
    """Log to stderr: JSON lines for machines, or a readable line for people."""
    handler = logging.StreamHandler()
    handler.addFilter(JobFieldsFilter())
    if json_lines:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s %(job)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
