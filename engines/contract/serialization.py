"""The base every contract model derives from, and the field types the wire rules need.

The wire rules (docs/spec/contract.md §4) live here once: `None` is omitted, a model names the list fields it
omits when empty, instants are written by `format_instant`, and text must be valid Unicode.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    model_serializer,
)


class WireModel(BaseModel):
    """A contract model whose `model_dump(mode="json")` is its wire form.

    Subclasses list in `wire_omit_empty` the fields written only when non-empty, and may
    override `_wire_omits` for a rule that depends on the value (the root namespace).
    """

    model_config = ConfigDict(
        extra="ignore",
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    wire_omit_empty: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _serialize_wire(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        omit = self.wire_omit_empty
        return {
            key: value
            for key, value in data.items()
            if value is not None and not (key in omit and not value) and not self._wire_omits(key)
        }

    def _wire_omits(self, key: str) -> bool:
        """Whether `key` is left out for a reason beyond `None` and emptiness."""
        return False


def _valid_unicode(value: str) -> str:
    # Lone surrogates cannot be encoded as UTF-8, so they would break every store and hash.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text must be valid unicode (it holds an unpaired surrogate)") from None
    return value


Text = Annotated[str, AfterValidator(_valid_unicode)]
"""A string field: any text that is valid Unicode."""


def format_instant(moment: datetime) -> str:
    """Write an instant as the wire does: UTC, seconds, a 3 or 6 digit fraction only when needed, `Z`."""
    moment = as_utc(moment)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    micros = moment.microsecond
    if micros:
        text += f".{micros // 1000:03d}" if micros % 1000 == 0 else f".{micros:06d}"
    return text + "Z"


def as_utc(moment: datetime) -> datetime:
    """The same instant in UTC; a naive value is taken to be UTC already. One that falls outside the years
    1 to 9999 in UTC (`0001-01-01T00:00:00+01:00`) is a `ValueError`, so validating it fails as a value."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{moment.isoformat()} is outside the years 1 to 9999 in UTC") from None


Instant = Annotated[
    datetime,
    AfterValidator(as_utc),
    PlainSerializer(format_instant, return_type=str, when_used="json"),
]
"""A timezone-aware UTC instant, written by `format_instant`."""
