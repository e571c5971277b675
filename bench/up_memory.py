"""`tinymemory up` on the sample notes: the process's memory through a churn of edits and queries.

    .venv/bin/python bench/up_memory.py [--seconds 60] [--notes examples/notes]

What a laptop user runs: `tinymemory up` on a folder (a copy of `examples/notes`, in a fresh data directory),
serving the API on a free loopback port. Once the first sync is done and every vector stored, the churn runs for
`--seconds`: each second one note is edited, one note is created and another deleted, and five hybrid and five
keyword fetches go to the API. The process's RSS (VmRSS) is sampled every second and its peak (VmHWM) read at
the end.

Side by side, in the same run, the same churn with the hashing embedder (no model loaded): the anchor, what the
process holds without an embedding model, so the difference is the default embedder's share.
Target (issue 32): <= 300 MB with the default embedder, at every sample.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _report import emit

ROOT = Path(__file__).resolve().parent.parent

TARGET_MB = 300
QUERIES = ["meeting notes", "how to deploy", "backup plan", "python tips", "travel checklist"]


@dataclass
class Run:
    samples_mb: list[float]
    peak_mb: float
    stored_s: float


def memory_mb(pid: int) -> dict[str, float]:
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0]) / 1024
    return found


def call(url: str, body: dict[str, Any] | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)


def started_url(process: subprocess.Popen[bytes], output: Path, timeout_s: float = 180) -> str:
    """The API's address, from the line `tinymemory up` prints once it serves."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = re.search(r"serving the API on (http://[0-9.:]+)", output.read_text(errors="replace"))
        if found:
            return found.group(1)
        if process.poll() is not None:
            raise SystemExit(f"tinymemory up ended ({process.returncode}): {output.read_text()[-2000:]}")
        time.sleep(0.2)
    raise SystemExit("tinymemory up did not start serving within 3 minutes")


def vectors_done(url: str, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        vectors = call(f"{url}/v1/status").get("vectors") or {}
        if vectors.get("waiting", 0) == 0:
            return
        time.sleep(0.5)
    raise SystemExit("the vectors were not all stored within 5 minutes")


def churn(notes: Path, kind: str, seconds: float) -> Run:
    work = Path(tempfile.mkdtemp(prefix="tm-up-memory-"))
    folder = work / "notes"
    shutil.copytree(notes, folder)
    env = {
        **os.environ,
        "TINYMEMORY_DATA_DIR": str(work / "data"),
        "TINYMEMORY_API_PORT": "0",
        "TINYMEMORY_ENGINES__LOCAL__EMBEDDER__KIND": kind,
    }
    env.pop("TINYMEMORY_CONFIG", None)
    command = [str(Path(sys.executable).parent / "tinymemory"), "up", str(folder)]
    began = time.monotonic()
    # Its output goes to a file, read for the API's address: an unread pipe would fill and stall it.
    output = work / "output"
    with output.open("wb") as out:
        process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = started_url(process, output)
        vectors_done(url)
        stored = time.monotonic() - began
        samples = []
        files = sorted(folder.rglob("*.md"))
        tick = 0
        start = time.monotonic()
        while time.monotonic() < start + seconds:
            edited = files[tick % len(files)]
            with edited.open("a", encoding="utf-8") as note:
                note.write(f"\nA line added at tick {tick}: the deploy checklist moved to the wiki.\n")
            (folder / f"new-{tick}.md").write_text(f"# Note {tick}\n\nBackup plan for week {tick}.\n")
            (folder / f"new-{tick - 3}.md").unlink(missing_ok=True)
            for query in QUERIES:
                for mode in ("hybrid", "keyword"):
                    call(f"{url}/v1/fetch", {"query": f"{query} {tick}", "mode": mode, "limit": 10})
            samples.append(memory_mb(process.pid)["VmRSS"])
            tick += 1
            time.sleep(max(0.0, start + tick - time.monotonic()))
        peak = memory_mb(process.pid)["VmHWM"]
        return Run(samples, peak, stored)
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--notes", type=Path, default=ROOT / "examples" / "notes")
    args = parser.parse_args()
    if not args.notes.is_dir():
        parser.error(f"--notes: {args.notes} is not a folder")
    runs = {}
    for kind in ("minilm", "hashing"):
        runs[kind] = run = churn(args.notes, kind, args.seconds)
        label = "default (MiniLM)" if kind == "minilm" else "hashing (anchor)"
        print(
            f"up {label:18s} RSS after the first sync {run.samples_mb[0]:6.0f} MB, "
            f"at the end {run.samples_mb[-1]:6.0f} MB, "
            f"highest sample {max(run.samples_mb):6.0f} MB, peak (VmHWM) {run.peak_mb:6.0f} MB "
            f"({len(run.samples_mb)} s of churn; first sync and vectors {run.stored_s:.1f} s)",
            flush=True,
        )
        emit(
            "up_memory",
            embedder=kind,
            first_mb=run.samples_mb[0],
            last_mb=run.samples_mb[-1],
            highest_mb=max(run.samples_mb),
            peak_mb=run.peak_mb,
            seconds=len(run.samples_mb),
        )
    ours, anchor = runs["minilm"], runs["hashing"]
    highest = max(ours.samples_mb)
    verdict = "met" if highest <= TARGET_MB else "missed"
    print(
        f"up: highest sample {highest:.0f} MB  target <= {TARGET_MB} MB: {verdict}  "
        f"ratio {highest / TARGET_MB:.2f}; the embedder's share {highest - max(anchor.samples_mb):.0f} MB "
        f"(ours / anchor {highest / max(anchor.samples_mb):.2f})"
    )


if __name__ == "__main__":
    main()
