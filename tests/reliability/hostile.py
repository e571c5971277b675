"""Hostile inputs and the resident memory they cost: entity bombs in XML, SVG and Word, and a sampler of the
peak RSS of this process and of every process below it (converter and text pool processes)."""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import string
import time
import zipfile
from pathlib import Path

from tests.fixtures.documents import docx_bytes
from tests.reliability.looping import Looping

MIB = 1024 * 1024
_PLACEHOLDER = "LAUGHS-GO-HERE"


def billion_laughs_dtd(levels: int = 9) -> str:
    """A DOCTYPE whose entity `lol{levels}` expands to 10**levels copies of "lol" (3 GB at 9 levels)."""
    entities = ['<!ENTITY lol0 "lol">']
    entities += [f'<!ENTITY lol{n} "{f"&lol{n - 1};" * 10}">' for n in range(1, levels + 1)]
    return "<!DOCTYPE lolz [\n" + "\n".join(entities) + "\n]>\n"


def laughs_xml(levels: int = 9) -> bytes:
    return f'<?xml version="1.0"?>\n{billion_laughs_dtd(levels)}<lolz>&lol{levels};</lolz>\n'.encode()


def laughs_svg(levels: int = 9) -> bytes:
    body = f'<svg xmlns="http://www.w3.org/2000/svg"><text x="0" y="10">&lol{levels};</text></svg>\n'
    return f'<?xml version="1.0"?>\n{billion_laughs_dtd(levels).replace("lolz", "svg")}{body}'.encode()


def laughs_docx(levels: int = 9) -> bytes:
    """A Word document whose body's one paragraph is the entity bomb (the DTD sits in `word/document.xml`)."""
    source = zipfile.ZipFile(io.BytesIO(docx_bytes([_PLACEHOLDER])))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for info in source.infolist():
            data = source.read(info).decode()
            if info.filename == "word/document.xml":
                declaration, rest = data.split("?>", 1)
                data = f"{declaration}?>\n{billion_laughs_dtd(levels).replace('lolz', 'w:document')}{rest}"
                data = data.replace(_PLACEHOLDER, f"&lol{levels};")
            archive.writestr(info.filename, data)
    return out.getvalue()


def headings_md(size: int) -> bytes:
    """`size` bytes of markdown that is nothing but headings, each of its own words (no digits, which the
    phone scrubber would weigh one by one)."""
    names = ("".join(letters) for letters in itertools.product(string.ascii_lowercase, repeat=4))
    lines = (f"{'#' * (1 + n % 3)} heading {name}\n".encode() for n, name in enumerate(names))
    out = bytearray()
    for line in lines:
        if len(out) + len(line) > size:
            return bytes(out)
        out += line
    return bytes(out)


def vm_hwm(pid: int | str = "self") -> int:
    """The peak resident set of a process, in bytes (0 once it is gone)."""
    return _status_bytes(pid, "VmHWM:")


def vm_rss(pid: int | str = "self") -> int:
    """The resident set of a process now, in bytes (0 once it is gone)."""
    return _status_bytes(pid, "VmRSS:")


def _status_bytes(pid: int | str, field: str) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith(field):
            return int(line.split()[1]) * 1024
    return 0


def reset_own_peak() -> None:
    """Start this process's peak RSS again from its current RSS (Linux `clear_refs` 5), where allowed."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def descendants(pid: int) -> set[int]:
    """Every live process below `pid`."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


class ChildPeaks(Looping):
    """Samples the peak RSS of every process below this one while inside, every `every_s` seconds.

    A process's VmHWM is its own high-water mark, so a sample loses only what a process reached in its
    last moments before it was killed (a converter over its clock or its memory ceiling).
    """

    def __init__(self, every_s: float = 0.05) -> None:
        super().__init__("child-peaks")
        self.every_s = every_s
        self.peaks: dict[int, int] = {}

    @property
    def highest(self) -> int:
        return max(self.peaks.values(), default=0)

    def step(self) -> None:
        self.finish()
        time.sleep(self.every_s)

    def finish(self) -> None:
        for pid in descendants(os.getpid()):
            self.peaks[pid] = max(self.peaks.get(pid, 0), vm_hwm(pid))
