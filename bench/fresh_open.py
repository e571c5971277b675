"""A fresh process opens an existing local-engine file and answers one query: how long, and how much memory.

    .venv/bin/python bench/fresh_open.py FILE --mode hybrid --embedder minilm --query "three words here"

What a newly started API process or worker meets: the engine is built the way the settings build it (the
registry's `local` entry, `EngineSettings` with this path and embedder kind), then it answers its first fetch
(limit 10) of the mode. The clock starts before the engine is built and stops at the answer, so it holds
opening the file, loading whatever the mode reads (the embedder's model, the vector index) and the query
itself; the interpreter's start and the imports before it are left to the caller, which times the whole
process (`fresh_open` below). Prints one JSON line: seconds, hits, RSS and peak RSS (VmRSS, VmHWM) in KiB.
The file is read as the OS has it cached: a file just written is in the page cache, as on a busy host.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engines.contract import FetchMode, FetchRequest
from engines.local import LocalEngine
from engines.registry import build_engine
from engines.settings import EmbedderSettings, EngineCredential, EngineSettings


def memory_kib() -> dict[str, int]:
    """This process's VmRSS and VmHWM (its peak), in KiB, from /proc/self/status."""
    found = {}
    for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            found[name] = int(value.split()[0])
    return found


async def first_answer(path: Path, embedder: str, mode: FetchMode, query: str) -> dict[str, Any]:
    settings = EngineSettings(path=path, embedder=EmbedderSettings(kind=embedder))
    started = time.perf_counter()
    engine = build_engine("local", settings, EngineCredential.none())
    assert isinstance(engine, LocalEngine)
    page = await engine.fetch(FetchRequest(query=query, mode=mode, limit=10))
    seconds = time.perf_counter() - started
    figures: dict[str, Any] = {"seconds": seconds, "hits": len(page.hits), **memory_kib()}
    engine.close()
    return figures


def fresh_open(path: Path, embedder: str, mode: FetchMode, query: str, timeout_s: float = 600) -> dict[str, Any]:
    """Run this script in a new interpreter; its figures, plus `wall_s` (start of the process to its exit)."""
    command = [sys.executable, __file__, str(path), "--mode", mode.value, "--embedder", embedder, "--query", query]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=timeout_s)
    wall = time.perf_counter() - started
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        errors = done.stderr.strip().splitlines()
        raise RuntimeError(f"fresh process failed ({done.returncode}): {errors[-1] if errors else ''}")
    return {**json.loads(lines[-1]), "wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", type=Path, help="an existing local-engine file")
    parser.add_argument("--mode", choices=[m.value for m in FetchMode], default="hybrid")
    parser.add_argument("--embedder", default="minilm", help="the embedder kind the file was indexed with")
    parser.add_argument("--query", required=True)
    args = parser.parse_args()
    if not args.path.is_file():
        parser.error(f"{args.path}: no such file")
    print(json.dumps(asyncio.run(first_answer(args.path, args.embedder, FetchMode(args.mode), args.query))))


if __name__ == "__main__":
    main()
