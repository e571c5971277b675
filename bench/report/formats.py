"""Benchmark of conversion throughput by format: our pipeline stages against markitdown alone, file by file.

    .venv/bin/python -m bench.report.formats [FOLDER ...] [--rounds 3] [--pages 100]

FOLDER defaults to the markitdown test files and a seeded sample of `--pages` tldr-pages (markdown) from
../shared/corpus. Every file is read into memory first; then, for `--rounds` rounds, in this one process:
  ours      `convert_document` (size check, sniff, the converter chain) and `assemble_items` (scrub, chunk):
            what a worker does with a unit's bytes before it stores them;
  anchor    markitdown's `MarkItDown().convert_stream` on the same bytes (with the file's extension), the
            converter most pipelines call and ours hands office formats to.
The two take turns on each file, alternating which goes first, so whatever else the machine does weighs on
both alike. Figures are per format (sniffed): files, MB, MB/s of input over CPU time for each, and the ratio
(anchor CPU / ours: above 1 is faster than markitdown). A file either refuses is counted in `failed` and
left out of both times, so the ratio compares the same work.
"""

from __future__ import annotations

import argparse
import io
import logging
import random
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench._report import emit
from engines.contract import MemoryMeta
from pipeline.convert import RawDocument, convert_document
from pipeline.items import ItemRules, assemble_items
from pipeline.sniff import sniff

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO.parent / "shared" / "corpus"


@dataclass
class FormatTimes:
    """The CPU seconds each side spent on one format's files, over every round."""

    files: set[str] = field(default_factory=set)
    size: int = 0
    ours_s: float = 0.0
    anchor_s: float = 0.0
    failed: set[str] = field(default_factory=set)


def corpus_files(folders: Sequence[Path], pages: int) -> list[Path]:
    """The files of `folders`, or by default the markitdown test files and a sample of tldr-pages."""
    if folders:
        return sorted(p for folder in folders for p in folder.rglob("*") if p.is_file())
    markitdown = sorted(p for p in (CORPUS / "markitdown-test-files").iterdir() if p.suffix and p.name != "LICENSE")
    tldr = sorted((CORPUS / "tldr-pages" / "pages").rglob("*.md"))
    return markitdown + random.Random(19).sample(tldr, min(pages, len(tldr)))


def ours(path: Path, data: bytes) -> None:
    converted = convert_document(RawDocument(data=data, filename=path.name))
    assemble_items(converted, MemoryMeta(file_path=str(path)), ItemRules())


def anchor_of() -> Callable[[Path, bytes], None]:
    from markitdown import MarkItDown, StreamInfo

    markitdown = MarkItDown()

    def convert(path: Path, data: bytes) -> None:
        markitdown.convert_stream(io.BytesIO(data), stream_info=StreamInfo(extension=path.suffix, filename=path.name))

    return convert


def cpu_of(work: Callable[[Path, bytes], None], path: Path, data: bytes) -> float | None:
    """CPU seconds of one conversion, or None when it refused the file."""
    started = time.process_time()
    try:
        work(path, data)
    except Exception:  # a refusal is a figure here (`failed`), whatever its kind
        return None
    return time.process_time() - started


def measure(files: list[Path], rounds: int) -> dict[str, FormatTimes]:
    anchor = anchor_of()
    loaded = [(path, path.read_bytes()) for path in files]
    warm: dict[str, tuple[Path, bytes]] = {}
    for path, data in loaded:
        warm.setdefault(sniff(data, path.name).value, (path, data))
    for path, data in warm.values():  # each format's imports and caches, outside the figures
        cpu_of(ours, path, data), cpu_of(anchor, path, data)
    by_format: dict[str, FormatTimes] = defaultdict(FormatTimes)
    for round_ in range(rounds):
        for n, (path, data) in enumerate(loaded):
            times = by_format[sniff(data, path.name).value]
            sides = [ours, anchor] if (n + round_) % 2 == 0 else [anchor, ours]
            spent = {side: cpu_of(side, path, data) for side in sides}
            if spent[ours] is None or spent[anchor] is None:
                times.failed.add(path.name)
                continue
            times.files.add(path.name)
            times.size += len(data)
            times.ours_s += spent[ours]
            times.anchor_s += spent[anchor]
    return dict(by_format)


def report(by_format: dict[str, FormatTimes]) -> None:
    print(f"{'format':12s} {'files':>5s} {'MB':>7s} {'ours MB/s':>10s} {'markitdown MB/s':>16s} {'ratio':>6s}  failed")
    for name, times in sorted(by_format.items(), key=lambda kv: -kv[1].size):
        failed = ", ".join(sorted(times.failed)) or "-"
        if not times.files:
            print(f"{name:12s} {0:5d} {'-':>7s} {'-':>10s} {'-':>16s} {'-':>6s}  {failed}")
            continue
        mb = times.size / 1e6
        ours_rate, anchor_rate = mb / max(times.ours_s, 1e-9), mb / max(times.anchor_s, 1e-9)
        ratio = times.anchor_s / max(times.ours_s, 1e-9)
        print(
            f"{name:12s} {len(times.files):5d} {mb:7.2f} {ours_rate:10.2f} {anchor_rate:16.2f} {ratio:6.2f}  {failed}"
        )
        emit(
            "formats",
            format=name,
            files=len(times.files),
            mb=mb,
            ours_mb_per_s=ours_rate,
            markitdown_mb_per_s=anchor_rate,
            ratio=ratio,
            failed=len(times.failed),
        )
    ours_s = sum(t.ours_s for t in by_format.values())
    anchor_s = sum(t.anchor_s for t in by_format.values())
    mb = sum(t.size for t in by_format.values()) / 1e6
    print(
        f"all formats: ours {mb / ours_s:.2f} MB/s, markitdown {mb / anchor_s:.2f} MB/s, ratio {anchor_s / ours_s:.2f}"
    )
    emit("all_formats", mb=mb, ours_mb_per_s=mb / ours_s, markitdown_mb_per_s=mb / anchor_s, ratio=anchor_s / ours_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="*", type=Path)
    parser.add_argument("--rounds", type=int, default=3, help="times each file is converted by each side")
    parser.add_argument("--pages", type=int, default=100, help="tldr pages in the default sample")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    warnings.simplefilter("ignore")  # markitdown's and pdfminer's warnings about the test files are not figures
    files = corpus_files(args.folders, args.pages)
    print(f"{len(files)} files, {args.rounds} rounds, CPU time of this process, the two sides taking turns")
    report(measure(files, args.rounds))


if __name__ == "__main__":
    main()
