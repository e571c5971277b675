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


def _float(text: str) -> float:
    return float(text.replace(",", ""))


def engine_records(output: str) -> list[Record]:
    """Records of tables `store`, `fetch` (one per mode) and `file`, for the lines that are there."""
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
    keyword = next((r for r in records if r.get("mode") == "keyword"), None)
    for record in records:  # hybrid and vector against keyword, measured side by side in the one run
        if keyword is not None and record["table"] == "fetch":
            record["p95_over_keyword"] = float(record["p95_ms"] or 0) / max(float(keyword["p95_ms"] or 0), 1e-9)
    return records
