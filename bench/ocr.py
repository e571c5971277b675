"""Benchmark of OCR on generated scans: word recall, character error rate, pages/s; against the `tesseract` command.

    .venv/bin/python bench/ocr.py [--pages 3] [--quick] [--seed 7] [--rapidocr-python /tmp/rapid-venv/bin/python]
                                  [--tldr ../shared/corpus/tldr-pages]
                                  [--markitdown ../shared/corpus/markitdown-test-files]

The set is made here, the same for a given `--seed`: letter-size pages of five paragraphs of ordinary English
words (different on every page), drawn with Pillow's own font at an 11 pt body (11 × dpi / 72 pixels) at 150,
200 and 300 dpi, under four conditions: clean; turned 1–2° either way (skew); 2% of the pixels flipped to black
or white (speckle); saved as JPEG at quality 15 (jpeg). PNG files (JPEG for the last) with their dpi recorded.
Timed on the same files, one dpi at a time, ours then the anchor:
  ours        `ConverterPool(2)` (warmed before the clock) fed by two threads: decode, deskew, Tesseract through
              tesserocr (the wheel's libtesseract, one thread per process);
  anchor      (tesseract-cli) the system's `tesseract FILE -` command two at a time, as `xargs -P2` runs it: one
              process and one model load per page; with OMP_THREAD_LIMIT=1 (OpenMP's default of a thread per core
              in each process made 36 pages take 2.8 times as long on 2 cores);
  RapidOCR    (`--rapidocr-python`: a separate venv with `rapidocr onnxruntime`, never this one) in one subprocess,
              page by page, its models loaded and one page read before the clock; onnxruntime uses both cores.
Per condition and dpi: word recall (the reference's words, lower-cased without punctuation, found in the output
as a multiset: order is not checked), character error rate (Levenshtein distance between the texts with every
run of whitespace made one space, over the reference's length: case and punctuation count), and pages/s (ours
and the command: pages × 2 lanes / the seconds those pages took in their lane; RapidOCR: pages / its seconds).
Then, through the same pool: image-only PDFs (each dpi's clean pages saved by Pillow at that dpi) and a mixed PDF
(text-layer pages of tests/fixtures/documents.py between two image pages), where only the image pages may be
read by OCR (`ocr_pages`); deskew on and off on the skewed pages (pipeline.convert.images, then Tesseract in
this process); the pool's start with OCR on and off; and, with `--tldr` (default: ../shared/corpus/tldr-pages
beside the checkout, when there), the first ingest of that folder through `EmbeddedRuntime` as bench/backfill.py
times it, with OCR on and off, best of two each: a folder without images should pay nothing for OCR. With
`--markitdown` (default: markitdown's test files beside the checkout), its scanned medical report is read through
the pool and scrubbed as an ingest stores it: it must yield text, and no telephone number may survive.
Targets: word recall >= 98% on clean 300 dpi pages and >= 95% on skewed or speckled 200 dpi pages; ours >= 0.8
of the command's pages/s over the whole set.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import logging
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

# bench/sources.py, first on the path of a script run from bench/, would shadow the `sources` package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import phonenumbers
from _report import emit
from backfill import copy_folder, load_line, timed_sync
from PIL import Image, ImageDraw, ImageFont

from pipeline.convert import ConverterPool, ConvertLimits, OcrSettings, RawDocument
from pipeline.convert.images import skew_angle, straightened
from pipeline.convert.ocr import TesseractReader
from pipeline.scrub import sanitize_text
from tests.fixtures.documents import pdf_bytes

DPIS = (150, 200, 300)
CONDITIONS = ("clean", "skew", "speckle", "jpeg")
BODY_PT = 11
SPECKLE = 0.02
JPEG_QUALITY = 15
LANES = 2
TARGET_RECALL = {("clean", 300): 0.98, ("skew", 200): 0.95, ("speckle", 200): 0.95}
TARGET_THROUGHPUT = 0.8
DEFAULT_TLDR = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "tldr-pages"
DEFAULT_MARKITDOWN = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "markitdown-test-files"
# markitdown's own test files hold a three-page scanned medical report with a telephone number on its letterhead.
SCANNED_REPORT = "MEDRPT-2024-PAT-3847_medical_report_scan.pdf"
_WORD_TEXT = """
    the of and to in is was for on that with as by at from his her they we you this have had are were which one all
    would there their been has more if will when who its about into than them some could time two may then do first
    any like now my such make over our even most made after also did many before must through back years where much
    your way well down should because each just those people how too little state good very make world still own
    see men work long get here between both life being under never day same another know while last might us great
    old year off come since against go came right used take three small large next early young important few public
    bad different following around possible water words number sound place house point light voice city river
    morning evening window garden table letter paper market money family school church street country mother father
    friend question answer reason result simple common open close round green black white yellow quiet careful
    happy strong short clear ready warm cold dry heavy bright sudden gentle narrow wide deep fresh plain fair early
    walk talk read write bring carry follow change happen remember listen watch answer begin leave return travel
    order decide explain finish measure notice prepare receive remain suggest wonder wander gather mountain valley
    forest harbour island village bridge station kitchen library doctor teacher farmer captain stranger neighbour
    winter summer autumn spring journey evening silence weather history picture story music colour pleasure
"""
WORDS = _WORD_TEXT.split()

T = TypeVar("T")


@dataclass(frozen=True)
class Page:
    """One generated page image: what it shows, where it is, and the angle it was turned by (skew only)."""

    condition: str
    dpi: int
    path: Path
    text: str
    angle: float = 0.0


@dataclass(frozen=True)
class Read:
    """What an engine read off one item, and the seconds it took in its lane."""

    text: str
    seconds: float
    error: str | None = None
    metadata: dict[str, str] | None = None


# -- the set ----------------------------------------------------------------------------------------------


def paragraphs(rng: random.Random, count: int = 5) -> list[str]:
    """`count` paragraphs of three to five sentences of common words, a comma here and there."""
    out = []
    for _ in range(count):
        sentences = []
        for _ in range(rng.randint(3, 5)):
            words = [rng.choice(WORDS) for _ in range(rng.randint(7, 14))]
            if len(words) > 8 and rng.random() < 0.4:
                words[rng.randint(3, len(words) - 4)] += ","
            sentences.append(" ".join(words).capitalize() + ".")
        out.append(" ".join(sentences))
    return out


def wrapped(paragraph: str, fits: Callable[[str], bool]) -> list[str]:
    """`paragraph` broken greedily into lines that `fits`."""
    lines, line = [], ""
    for word in paragraph.split():
        candidate = f"{line} {word}" if line else word
        if line and not fits(candidate):
            lines.append(line)
            candidate = word
        line = candidate
    return [*lines, line] if line else lines


def rendered(paras: Sequence[str], dpi: int) -> Image.Image:
    """A white letter-size page at `dpi`, one-inch margins, `paras` in black at an 11 pt body."""
    size = round(BODY_PT * dpi / 72)
    font = ImageFont.load_default(size=size)
    width, height = int(8.5 * dpi), int(11 * dpi)
    image = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(image)
    y = dpi
    for paragraph in paras:
        for line in wrapped(paragraph, lambda text: font.getlength(text) <= width - 2 * dpi):
            draw.text((dpi, y), line, font=font, fill=0)
            y += round(size * 1.3)
        y += round(size * 0.7)
    return image


def degraded(image: Image.Image, condition: str, rng: random.Random) -> tuple[Image.Image, float]:
    """`image` under `condition` (skew turns it, speckle flips pixels; clean and jpeg leave it), and the angle."""
    if condition == "skew":
        angle = rng.uniform(1.0, 2.0) * rng.choice((-1, 1))
        return image.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=255), angle
    if condition == "speckle":
        pixels = np.array(image)
        noise = np.random.default_rng(rng.randrange(2**32)).random(pixels.shape)
        pixels[noise < SPECKLE / 2] = 0
        pixels[noise > 1 - SPECKLE / 2] = 255
        return Image.fromarray(pixels), 0.0
    return image, 0.0


def make_pages(folder: Path, seed: int, count: int) -> list[Page]:
    """`count` pages per condition and dpi, written under `folder`."""
    pages = []
    for dpi in DPIS:
        for condition in CONDITIONS:
            for index in range(count):
                rng = random.Random(f"{seed}-{dpi}-{condition}-{index}")
                paras = paragraphs(rng)
                image, angle = degraded(rendered(paras, dpi), condition, rng)
                path = folder / f"{dpi}-{condition}-{index}.{'jpg' if condition == 'jpeg' else 'png'}"
                if condition == "jpeg":
                    image.save(path, dpi=(dpi, dpi), quality=JPEG_QUALITY)
                else:
                    image.save(path, dpi=(dpi, dpi))
                pages.append(Page(condition, dpi, path, "\n\n".join(paras), angle))
    return pages


# -- measures ---------------------------------------------------------------------------------------------


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def recall(reference: str, output: str) -> float:
    """The share of the reference's words found in the output, counted as a multiset."""
    wanted, found = Counter(words(reference)), Counter(words(output))
    return sum((wanted & found).values()) / max(1, sum(wanted.values()))


def levenshtein(a: str, b: str) -> int:
    """Edit distance of `a` and `b`, bit-parallel over `a` (Myers 1999, Hyyrö 2003): fast on pages of text."""
    if not a or not b:
        return len(a) + len(b)
    mask, high = (1 << len(a)) - 1, 1 << (len(a) - 1)
    peq: dict[str, int] = {}
    for index, char in enumerate(a):
        peq[char] = peq.get(char, 0) | (1 << index)
    pv, mv, score = mask, 0, len(a)
    for char in b:
        eq = peq.get(char, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq
        ph = (mv | ~(xh | pv)) & mask
        mh = pv & xh
        score += 1 if ph & high else -1 if mh & high else 0
        ph = ((ph << 1) | 1) & mask
        mh = (mh << 1) & mask
        pv = (mh | ~(xv | ph)) & mask
        mv = ph & xv
    return score


def cer(reference: str, output: str) -> float:
    """Character error rate: edit distance over the reference's length, whitespace runs made one space."""
    ref, out = " ".join(reference.split()), " ".join(output.split())
    return levenshtein(ref, out) / max(1, len(ref))


# -- the engines ------------------------------------------------------------------------------------------


def in_lanes(items: Sequence[T], work: Callable[[T], Read]) -> tuple[list[Read], float]:
    """Each item through `work` from `LANES` threads, as `xargs -P2` would run them; the reads and the wall time."""
    started = time.perf_counter()
    with ThreadPoolExecutor(LANES) as lanes:
        reads = list(lanes.map(work, items))
    return reads, time.perf_counter() - started


def timed(read: Callable[[], tuple[str, dict[str, str] | None]]) -> Read:
    started = time.perf_counter()
    try:
        text, metadata = read()
    except Exception as exc:  # one page's failure is a row's figure, not the run's end
        return Read("", time.perf_counter() - started, f"{type(exc).__name__}: {exc}")
    return Read(text, time.perf_counter() - started, metadata=metadata)


def ours(pool: ConverterPool, filename: str, data: bytes) -> Read:
    raw = RawDocument(data, filename=filename)

    def read() -> tuple[str, dict[str, str] | None]:
        done = pool.convert(raw)
        return ("" if done.no_text else done.markdown), done.metadata

    return timed(read)


def command(path: Path) -> Read:
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}

    def read() -> tuple[str, None]:
        done = subprocess.run(["tesseract", str(path), "-", "-l", "eng"], capture_output=True, env=env, check=True)
        return done.stdout.decode(), None

    return timed(read)


RAPID_SCRIPT = """
import json, logging, sys, time
logging.disable(logging.WARNING)
from rapidocr import RapidOCR
paths = json.loads(sys.stdin.read())
started = time.perf_counter()
engine = RapidOCR()
engine(paths[0])
load = time.perf_counter() - started
pages, started = [], time.perf_counter()
for path in paths:
    began = time.perf_counter()
    result = engine(path)
    pages.append({"text": "\\n".join(result.txts or ()), "seconds": time.perf_counter() - began})
print(json.dumps({"load_s": load, "wall_s": time.perf_counter() - started, "pages": pages}))
"""


def rapidocr(python: str, pages: Sequence[Page]) -> tuple[list[Read], float, float]:
    """RapidOCR's reads of `pages` in one subprocess of `python`, its wall time, and its load (not timed)."""
    done = subprocess.run(
        [python, "-c", RAPID_SCRIPT],
        input=json.dumps([str(page.path) for page in pages]),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"RapidOCR failed ({python}): {done.stderr.strip().splitlines()[-1:]}")
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    reads = [Read(page["text"], page["seconds"]) for page in answer["pages"]]
    return reads, answer["wall_s"], answer["load_s"]


# -- the runs ---------------------------------------------------------------------------------------------


@dataclass
class Engine:
    """One engine's reads of the page set (in page order), its wall time, and the lanes its seconds ran in."""

    name: str
    lanes: int
    reads: dict[Path, Read]
    wall_s: float = 0.0


def run_images(pool: ConverterPool, pages: Sequence[Page]) -> tuple[Engine, Engine]:
    """Ours and the command over `pages`, one dpi at a time, in turn, so both meet the same machine."""
    mine, theirs = Engine("ours", LANES, {}), Engine("tesseract-cli", LANES, {})
    for dpi in DPIS:
        batch = [page for page in pages if page.dpi == dpi]
        for engine, work in (
            (mine, lambda page: ours(pool, page.path.name, page.path.read_bytes())),
            (theirs, lambda page: command(page.path)),
        ):
            reads, wall = in_lanes(batch, work)
            engine.reads.update(zip((page.path for page in batch), reads, strict=True))
            engine.wall_s += wall
    return mine, theirs


def rate(engine: Engine, reads: Sequence[Read]) -> float:
    return engine.lanes * len(reads) / max(1e-9, sum(read.seconds for read in reads))


def row_figures(engine: Engine, rows: Sequence[Page]) -> tuple[float, float, float]:
    reads = [engine.reads[page.path] for page in rows]
    quality = [(recall(p.text, r.text), cer(p.text, r.text)) for p, r in zip(rows, reads, strict=True)]
    return float(np.mean([q[0] for q in quality])), float(np.mean([q[1] for q in quality])), rate(engine, reads)


def fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def print_table(pages: Sequence[Page], engines: Sequence[Engine]) -> None:
    """One row per condition and dpi: each engine's recall, CER and pages/s, ours over the command, the target."""
    header = ["condition", "dpi", "pages", "words"]
    for engine in engines:
        header += [f"{engine.name} recall", f"{engine.name} CER", f"{engine.name} p/s"]
    header += ["ours/cli p/s", "recall target", "ours/target"]
    rows = [header]
    for condition in CONDITIONS:
        for dpi in DPIS:
            chosen = [page for page in pages if page.condition == condition and page.dpi == dpi]
            row = [condition, str(dpi), str(len(chosen)), str(sum(len(words(page.text)) for page in chosen))]
            figures = {}
            for engine in engines:
                figures[engine.name] = row_figures(engine, chosen)
                got, error, per_s = figures[engine.name]
                row += [f"{got:.1%}", f"{error:.2%}", f"{per_s:.2f}"]
                emit(
                    "quality",
                    condition=condition,
                    dpi=dpi,
                    engine=engine.name,
                    recall=got,
                    cer=error,
                    pages_per_s=per_s,
                )
            target = TARGET_RECALL.get((condition, dpi))
            ratio = figures["ours"][2] / figures["tesseract-cli"][2]
            row += [f"{ratio:.2f}", fmt(target, ".0%"), fmt(target and figures["ours"][0] / target, ".3f")]
            rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        print(" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    print(
        "recall: the reference's words found, lower-cased, as a multiset (order not checked); CER: edit distance / "
        "reference characters, whitespace runs as one space; p/s: pages × lanes / their seconds (RapidOCR: 1 lane)"
    )


def print_throughput(pages: Sequence[Page], engines: Sequence[Engine]) -> None:
    mine, theirs = engines[0], engines[1]
    ours_rate, their_rate = len(pages) / mine.wall_s, len(pages) / theirs.wall_s
    ratio = ours_rate / their_rate
    emit("throughput", pages=len(pages), ours=ours_rate, tesseract_cli=their_rate, ratio=ratio)
    print(
        f"throughput over all {len(pages)} pages (wall): ours {ours_rate:.2f} pages/s ({mine.wall_s:.1f} s), "
        f"tesseract command {their_rate:.2f} pages/s ({theirs.wall_s:.1f} s); ours/tesseract = {ratio:.2f}  "
        f"target >= {TARGET_THROUGHPUT}  ratio to target {ratio / TARGET_THROUGHPUT:.2f}"
    )
    for engine in engines[2:]:
        print(f"{engine.name}: {len(pages) / engine.wall_s:.2f} pages/s ({engine.wall_s:.1f} s, both cores per page)")
    for engine in engines:
        failed = [f"{path.name}: {read.error}" for path, read in engine.reads.items() if read.error]
        if failed:
            print(f"{engine.name}: {len(failed)} pages failed: " + "; ".join(failed[:3]))


# -- PDFs -------------------------------------------------------------------------------------------------


def image_pdf(pages: Sequence[Page]) -> bytes:
    """`pages` as an image-only PDF at their dpi, as a scanner writes one."""
    images = [Image.open(page.path).convert("L") for page in pages]
    out = io.BytesIO()
    images[0].save(out, format="PDF", save_all=True, append_images=images[1:], resolution=pages[0].dpi)
    return out.getvalue()


def mixed_pdf(texts: Sequence[str], scans: bytes) -> bytes:
    """Text-layer pages (`texts`) and the image pages of `scans`, taking turns: text, image, text, image."""
    import pypdfium2

    lines = [
        "\n".join(line for para in text.split("\n\n") for line in wrapped(para, lambda s: len(s) <= 80))
        for text in texts
    ]
    layer, images = pypdfium2.PdfDocument(pdf_bytes(lines)), pypdfium2.PdfDocument(scans)
    merged = pypdfium2.PdfDocument.new()
    for index in range(len(images)):
        merged.import_pages(layer, [index])
        merged.import_pages(images, [index])
    out = io.BytesIO()
    merged.save(out)
    return out.getvalue()


@dataclass(frozen=True)
class PdfCase:
    """A PDF to convert: its bytes, the text it holds, its pages and how many of them are scans."""

    name: str
    data: bytes
    reference: str
    pages: int
    scans: int


def pdf_cases(pages: Sequence[Page], seed: int) -> list[PdfCase]:
    """Each dpi's clean pages as one image-only PDF, and a mixed PDF of text-layer pages and scans."""
    cases = []
    for dpi in DPIS:
        clean = [page for page in pages if page.condition == "clean" and page.dpi == dpi]
        reference = "\n\n".join(page.text for page in clean)
        cases.append(PdfCase(f"image-only PDF, {dpi} dpi", image_pdf(clean), reference, len(clean), len(clean)))
    scans = [page for page in pages if page.condition == "clean" and page.dpi == 200][:2]
    texts = ["\n\n".join(paragraphs(random.Random(f"{seed}-layer-{index}"))) for index in range(len(scans))]
    reference = "\n\n".join(text for pair in zip(texts, (page.text for page in scans), strict=True) for text in pair)
    name = f"mixed PDF: {len(scans)} text + {len(scans)} scans, 200 dpi"
    cases.append(PdfCase(name, mixed_pdf(texts, image_pdf(scans)), reference, 2 * len(scans), len(scans)))
    return cases


def run_pdfs(pool: ConverterPool, pages: Sequence[Page], seed: int) -> None:
    """The PDFs through the pool from two threads; each document is read by one worker, page after page."""
    cases = pdf_cases(pages, seed)
    reads, _ = in_lanes(cases, lambda case: ours(pool, "scan.pdf", case.data))
    print(
        f"{'PDF (ours; one worker a document)':<38} | pages | ocr_pages (expected) | recall | CER    | s      | pages/s"
    )
    for case, read in zip(cases, reads, strict=True):
        scanned = int((read.metadata or {}).get("ocr_pages", "0"))
        got, error = recall(case.reference, read.text), cer(case.reference, read.text)
        verdict = "OK" if scanned == case.scans and not read.error else f"FAIL {read.error or ''}"
        figures = {"recall": got, "cer": error, "seconds": read.seconds}
        emit("pdf", case=case.name, pages=case.pages, ocr_pages=scanned, expected=case.scans, **figures)
        print(
            f"{case.name:<38} | {case.pages:<5} | {scanned} ({case.scans}) {verdict:<14} | {got:6.1%} | "
            f"{error:6.2%} | {read.seconds:6.2f} | {case.pages / read.seconds:7.2f}"
        )


# -- deskew -----------------------------------------------------------------------------------------------


def run_deskew(pages: Sequence[Page]) -> None:
    """Skewed pages read by Tesseract in this process with and without `straightened`, two threads; and the
    angle `skew_angle` finds on the clean pages (any at 0.5° or more would be turned for nothing)."""
    settings, local, readers = OcrSettings(), threading.local(), []

    def work(item: tuple[Page, bool]) -> tuple[Read, float]:
        page, on = item
        if not hasattr(local, "reader"):
            local.reader = TesseractReader(settings)
            readers.append(local.reader)
        grey = Image.open(page.path).convert("L")
        started = time.perf_counter()
        image = straightened(grey) if on else grey
        turning = time.perf_counter() - started
        return timed(lambda: (local.reader.read(image, page.path.name).text, None)), turning

    skewed = [page for page in pages if page.condition == "skew"]
    items = [(page, on) for page in skewed for on in (False, True)]
    with ThreadPoolExecutor(LANES) as lanes:
        results = dict(zip(items, lanes.map(work, items), strict=True))
    for reader in readers:
        reader.close()
    print(
        "deskew (skewed pages, Tesseract in this process): dpi | page turned by -> deskew turns back | "
        "recall off -> on | CER off -> on | deskew s/page"
    )
    for dpi in DPIS:
        chosen = [page for page in skewed if page.dpi == dpi]
        found = [skew_angle(Image.open(page.path).convert("L")) for page in chosen]
        off = [results[(page, False)][0] for page in chosen]
        on = [results[(page, True)] for page in chosen]
        figures = {
            "recall_off": np.mean([recall(p.text, r.text) for p, r in zip(chosen, off, strict=True)]),
            "recall_on": np.mean([recall(p.text, r.text) for p, (r, _) in zip(chosen, on, strict=True)]),
            "cer_off": np.mean([cer(p.text, r.text) for p, r in zip(chosen, off, strict=True)]),
            "cer_on": np.mean([cer(p.text, r.text) for p, (r, _) in zip(chosen, on, strict=True)]),
            "deskew_s": np.mean([seconds for _, seconds in on]),
        }
        emit("deskew", dpi=dpi, **{key: float(value) for key, value in figures.items()})
        angles = ", ".join(f"{page.angle:+.2f}° -> {angle:+.2f}°" for page, angle in zip(chosen, found, strict=True))
        print(
            f"  {dpi} dpi | {angles} | {figures['recall_off']:.1%} -> {figures['recall_on']:.1%} | "
            f"{figures['cer_off']:.2%} -> {figures['cer_on']:.2%} | {figures['deskew_s']:.2f} s"
        )
    clean = [page for page in pages if page.condition == "clean"]
    found = [skew_angle(Image.open(page.path).convert("L")) for page in clean]
    turned = sum(abs(angle) >= 0.5 for angle in found)
    print(f"  clean pages: skew found {', '.join(f'{a:+.2f}°' for a in found)}; {turned} of {len(clean)} turned")


# -- cost to a folder without images -------------------------------------------------------------------


def pool_start(enabled: bool) -> float:
    """Seconds to start a two-worker pool (every converter warmed: with OCR, Tesseract's model loaded)."""
    with ConverterPool(LANES, ConvertLimits(ocr=OcrSettings(enabled=enabled))) as pool:
        started = time.perf_counter()
        pool.warm(wait=True)
        return time.perf_counter() - started


def first_ingest(root: Path, data: Path, enabled: bool) -> Any:
    """bench/backfill.py's first step (warm converter pool, `EmbeddedRuntime.sync`), OCR on or off."""
    from worker.control import ensure_local_source
    from worker.embedded.runtime import EmbeddedRuntime
    from worker.settings import Settings

    async def first() -> Any:
        settings = Settings(data_dir=data, convert_workers=LANES, ocr=OcrSettings(enabled=enabled))
        with EmbeddedRuntime(settings) as runtime:
            runtime.converter.warm(wait=True)
            return await timed_sync(runtime, ensure_local_source(runtime.state, root).id)

    return asyncio.run(first())


def run_scanned_report(folder: Path | None, pool: ConverterPool) -> None:
    """markitdown's scanned report through the pool and the scrubber, as an ingest stores it: read, and its
    telephone number redacted."""
    path = None if folder is None else folder / SCANNED_REPORT
    if path is None or not path.is_file():
        print(f"scanned report: skipped (no {SCANNED_REPORT} in {folder or 'a --markitdown folder'})")
        return
    started = time.perf_counter()
    document = pool.convert(RawDocument(path.read_bytes(), filename=path.name))
    seconds = time.perf_counter() - started
    scrubbed = sanitize_text(document.markdown).value
    phones = [m.raw_string for m in phonenumbers.PhoneNumberMatcher(document.markdown, "US")]
    left = [phone for phone in phones if phone in scrubbed]
    ok = bool(document.markdown.strip()) and bool(phones) and not left and "[REDACTED_PII_PHONE]" in scrubbed
    emit("scanned_report", pages=int(document.metadata.get("pages", "0")), chars=len(document.markdown), ok=ok)
    print(
        f"markitdown's scanned report: {document.metadata.get('ocr_pages')} of {document.metadata.get('pages')} "
        f"pages read by OCR in {seconds:.1f} s, {len(document.markdown):,} characters; telephone numbers found "
        f"{len(phones)}, left after scrubbing {len(left)}  [{'OK' if ok else 'MISSED'}]"
    )


def run_folder(folder: Path | None) -> None:
    starts = {enabled: min(pool_start(enabled) for _ in range(2)) for enabled in (True, False)}
    emit("pool_start", ocr_on=starts[True], ocr_off=starts[False])
    print(
        f"converter pool start (2 workers, warmed, best of 2): OCR on {starts[True]:.2f} s, "
        f"off {starts[False]:.2f} s (not in the first-ingest times below: both warm first)"
    )
    if folder is None or not folder.is_dir():
        print(f"folder: skipped ({folder or 'no --tldr, and no ../shared/corpus/tldr-pages'} is not a folder here)")
        return
    best: dict[bool, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tm-ocr-folder-") as scratch:
        root = copy_folder(folder, Path(scratch) / "folder")
        for turn, enabled in enumerate((True, False, True, False)):
            synced = first_ingest(root, Path(scratch) / f"data-{turn}", enabled)
            if enabled not in best or synced.seconds < best[enabled].seconds:
                best[enabled] = synced
    on, off = best[True], best[False]
    emit("folder", folder=folder.name, ocr_on=on.seconds, ocr_off=off.seconds, ratio=on.seconds / off.seconds)
    print(
        f"first ingest of {folder.name} ({on.sync.upserts} files, {on.items} items; best of 2, OCR on and off in "
        f"turn): OCR on {on.seconds:.3f} s, off {off.seconds:.3f} s ({off.items} items); on/off = "
        f"{on.seconds / off.seconds:.2f} (expected 1.00 within noise; bench/backfill.py times the same step)"
    )


# -- main -------------------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=3, help="pages per condition and dpi (default 3)")
    parser.add_argument("--quick", action="store_true", help="one page per condition and dpi, no deskew study")
    parser.add_argument("--seed", type=int, default=7, help="the seed of the texts and the damage")
    parser.add_argument("--rapidocr-python", help="a Python with `rapidocr onnxruntime` installed, to compare")
    parser.add_argument(
        "--tldr",
        type=Path,
        default=DEFAULT_TLDR if DEFAULT_TLDR.is_dir() else None,
        help="a folder without images to ingest with OCR on and off (default: tldr-pages beside the checkout)",
    )
    parser.add_argument(
        "--markitdown",
        type=Path,
        default=DEFAULT_MARKITDOWN if DEFAULT_MARKITDOWN.is_dir() else None,
        help=f"markitdown's test files, whose {SCANNED_REPORT} must be read and scrubbed "
        "(default: beside the checkout)",
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    logging.basicConfig(level=logging.ERROR)  # a folder's dead letters are counted by its sync, not logged
    count = 1 if args.quick else args.pages
    print(load_line("at start"), flush=True)
    with tempfile.TemporaryDirectory(prefix="tm-ocr-") as scratch:
        pages = make_pages(Path(scratch), args.seed, count)
        print(
            f"{len(pages)} pages: {count} per condition ({', '.join(CONDITIONS)}) and dpi "
            f"({', '.join(map(str, DPIS))}), "
            f"{sum(len(words(page.text)) for page in pages):,} words; speckle {SPECKLE:.0%} of pixels, "
            f"JPEG quality {JPEG_QUALITY}",
            flush=True,
        )
        with ConverterPool(LANES, ConvertLimits()) as pool:
            pool.warm(wait=True)
            engines = list(run_images(pool, pages))
            if args.rapidocr_python:
                reads, wall, load = rapidocr(args.rapidocr_python, pages)
                engines.append(Engine("RapidOCR", 1, dict(zip((p.path for p in pages), reads, strict=True)), wall))
                print(f"RapidOCR: models loaded and one page read in {load:.1f} s before its clock")
            print()
            print_table(pages, engines)
            print()
            print_throughput(pages, engines)
            print()
            run_pdfs(pool, pages, args.seed)
            print()
            run_scanned_report(args.markitdown, pool)
        print()
        if not args.quick:
            run_deskew(pages)
            print()
    run_folder(args.tldr)
    print(load_line("at end"))


if __name__ == "__main__":
    main()
