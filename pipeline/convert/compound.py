"""Outlook messages (OLE2 compound files) checked before markitdown opens them.

Only a name or MIME makes an OLE2 file a `.msg` (sniffing cannot look inside), so the container is opened
once here: a damaged one, or a legacy Word or Excel file under a `.msg` name, is refused with that reason
instead of surfacing as an arbitrary exception from deep inside the reader.
"""

from __future__ import annotations

import importlib
import io

from engines.contract import InvalidRequestError
from pipeline.convert.documents import RawDocument
from pipeline.convert.failures import describe

# Every Outlook message stores its properties as streams named `__substg1.0_<tag>` (MS-OXMSG §2.1.3).
_MESSAGE_STREAM_PREFIX = "__substg1.0_"


def check_outlook_message(raw: RawDocument) -> None:
    """Refuse `raw` unless it is a readable OLE2 file holding an Outlook message."""
    # olefile has no type hints; it is imported here because only a worker reading a message needs it.
    olefile = importlib.import_module("olefile")
    try:
        with olefile.OleFileIO(io.BytesIO(raw.data)) as container:
            names = ["/".join(path) for path in container.listdir(streams=True, storages=False)]
    except MemoryError:
        raise
    except Exception as exc:
        raise InvalidRequestError(f"{raw.label}: unreadable msg ({describe(exc)})") from exc
    if not any(name.startswith(_MESSAGE_STREAM_PREFIX) for name in names):
        raise InvalidRequestError(f"{raw.label} is an OLE2 file but not an Outlook message")
