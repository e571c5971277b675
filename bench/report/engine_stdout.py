"""bench/engine_local.py's figures, read from what it prints (it writes no records of its own)."""

from __future__ import annotations

import re

from bench.report.runs import Record

_STORE = re.compile(r"store_many \((?P<embedder>[^)]*)\): (?P<rate>[\d,.]+) items/s overall")
_FETCH = re.compile(
    r"fetch (?P<mode>\w+)\s+p50\s+(?P<p50>[\d.]+) ms\s+p95\s+(?P<p95>[\d.]+) ms.*?"
    r"(?:source doc in top 10: (?P<found>\d+)%)?$",
    re.MULTILINE,
)
_VECTORS = re.compile(r"all embedded (?P<seconds>[\d.]+) s after the first store")
_SIZE = re.compile(r"file size: (?P<mib>[\d,.]+) MiB \((?P<per_item>[\d,]+) bytes per item\)")
_DATA_DIR = re.compile(r"data dir: (?P<mib>[\d,.]+) MiB .*?\((?P<per_item>[\d,]+) bytes per item")
_FRESH = re.compile(
    r"fresh process (?P<mode>\w+)\s+open \+ first answer\s+(?P<seconds>[\d.]+) s.*?"
    r"RSS (?P<rss>[\d,]+) MiB, peak (?P<peak>[\d,]+) MiB"
)
_EMBED_RATE = re.compile(
    r"embed: (?P<side>plain onnxruntime|ours)[^\d]*(?P<rate>[\d.]+) passages/s\s+peak RSS\s+(?P<rss>\d+) MB"
)
_EMBED_COSINE = re.compile(r"embed: min cosine to plain\s+(?P<cosine>[\d.]+)")


def _float(text: str) -> float:
    return float(text.replace(",", ""))


def _embedding(output: str) -> list[Record]:
    """The `embed:` lines (`embedding.py`'s, printed with MiniLM): one record, ours against plain onnxruntime."""
    sides = {m["side"]: m for m in _EMBED_RATE.finditer(output)}
    if "ours" not in sides or "plain onnxruntime" not in sides:
        return []
    ours, plain = sides["ours"], sides["plain onnxruntime"]
    cosine = _EMBED_COSINE.search(output)
    return [
        {
            "table": "embed",
            "passages_per_s": _float(ours["rate"]),
            "anchor_passages_per_s": _float(plain["rate"]),
            "ratio": _float(ours["rate"]) / max(_float(plain["rate"]), 1e-9),
            "peak_rss_mb": _float(ours["rss"]),
            "anchor_peak_rss_mb": _float(plain["rss"]),
            "min_cosine": _float(cosine["cosine"]) if cosine else None,
        }
    ]


def engine_records(output: str) -> list[Record]:
    """Records of tables `store`, `fetch` (one per mode), `fresh` (one per mode: a new process's open and first
    answer), `file`, `data_dir` and `embed`, for the lines that are there."""
    records: list[Record] = []
    if store := _STORE.search(output):
        vectors = _VECTORS.search(output)
        records.append(
            {
                "table": "store",
                "embedder": store["embedder"],
                "items_per_s": _float(store["rate"]),
                "vectors_done_s": _float(vectors["seconds"]) if vectors else None,
            }
        )
    for fetch in _FETCH.finditer(output):
        found = fetch["found"]
        records.append(
            {
                "table": "fetch",
                "mode": fetch["mode"],
                "p50_ms": _float(fetch["p50"]),
                "p95_ms": _float(fetch["p95"]),
                "source_in_top10": None if found is None else int(found) / 100,
            }
        )
    if size := _SIZE.search(output):
        records.append({"table": "file", "mib": _float(size["mib"]), "bytes_per_item": _float(size["per_item"])})
    if data := _DATA_DIR.search(output):
        records.append({"table": "data_dir", "mib": _float(data["mib"]), "bytes_per_item": _float(data["per_item"])})
    records.extend(
        {
            "table": "fresh",
            "mode": fresh["mode"],
            "open_s": _float(fresh["seconds"]),
            "rss_mib": _float(fresh["rss"]),
            "peak_mib": _float(fresh["peak"]),
        }
        for fresh in _FRESH.finditer(output)
    )
    records.extend(_embedding(output))
    keyword = next((r for r in records if r.get("mode") == "keyword"), None)
    for record in records:  # hybrid and vector against keyword, measured side by side in the one run
        if keyword is not None and record["table"] == "fetch":
            record["p95_over_keyword"] = float(record["p95_ms"] or 0) / max(float(keyword["p95_ms"] or 0), 1e-9)
    return records
