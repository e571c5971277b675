"""Benchmark of the scrubber's quality and speed: recall per class, prose left alone, throughput.

    .venv/bin/python bench/scrub_quality.py [PAGES] [--repeat 5] [--sample 40] [--anchor COMMIT]

PAGES defaults to ../shared/corpus/tldr-pages/pages (every `*.md` below it). Three parts:

  recall      each labelled table of the tests (vendor tokens, cloud credentials, developer and SaaS tokens,
              assigned secrets, URL passwords and private keys, identifiers, national ids, phones:
              tests/unit/pipeline/scrub/test_*.py) scrubbed under the default policy; a line per table (a
              vendor family, a kind of identifier), then per class the share of rows whose secret did not
              survive, beside the same figure under `Policy.spec_compatible()`. The prose table's rows must
              come out unchanged, and so must the near misses (shaped like a secret or an id, and not one):
              the share altered is printed against its target.
  prose       the share of PAGES the default changes, with a sample of the changed lines (every changed
              page when there are few), beside the anchor's share;
  throughput  MB/s of UTF-8 over PAGES in CPU time of this process, over `--repeat` rounds in which the
              default, `Policy.spec_compatible()` and the anchor take turns on each page (so whatever else
              the machine does weighs on all three alike); "ratio" is the anchor's time over each one's.

The anchor is today's scrubber: `pipeline/scrub` as it was at `--anchor` (the commit before issue 15's
change), extracted with `git archive` into a temporary package and imported beside the current one. Without
git or that commit, `Policy.spec_compatible()` stands in for it, and the output says so.
Targets: recall >= 99% on every class claimed; near misses altered <= 5%; <= 0.5% of the pages changed, each a
real secret or identifier; throughput no worse than the anchor's.
"""

from __future__ import annotations

import argparse
import importlib
import io
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

# Run as a script, the repository root must come first on the path, for `pipeline` and `tests` alike.
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _report import emit  # noqa: E402

from pipeline.scrub import Policy, sanitize_text  # noqa: E402
from tests.unit.pipeline.scrub.test_credentials import CREDENTIAL_ROWS  # noqa: E402
from tests.unit.pipeline.scrub.test_national_ids import NATIONAL_ROWS, NEAR_MISS_ROWS  # noqa: E402
from tests.unit.pipeline.scrub.test_phones import PHONE_ROWS  # noqa: E402
from tests.unit.pipeline.scrub.test_pii_ids import PII_ROWS  # noqa: E402
from tests.unit.pipeline.scrub.test_prose import PROSE_ROWS  # noqa: E402
from tests.unit.pipeline.scrub.test_tables import Labelled, recall  # noqa: E402
from tests.unit.pipeline.scrub.test_vendors import VENDOR_ROWS  # noqa: E402
from tests.unit.pipeline.scrub.test_vendors_cloud import CLOUD_ROWS  # noqa: E402
from tests.unit.pipeline.scrub.test_vendors_cloud import NEAR_MISSES as CLOUD_NEAR_MISSES  # noqa: E402
from tests.unit.pipeline.scrub.test_vendors_saas import NEAR_MISSES as SAAS_NEAR_MISSES  # noqa: E402
from tests.unit.pipeline.scrub.test_vendors_saas import SAAS_ROWS  # noqa: E402

ANCHOR_COMMIT = "18c30ce"
TARGET_RECALL = 0.99
TARGET_CHANGED = 0.005
TARGET_NEGATIVES_ALTERED = 0.05
Scrub = Callable[[str], str]

# One line per family (the vendor families of `vendors`, `vendors_cloud` and `vendors_saas` apart), then a line
# per class under it.
TABLES: dict[str, list[Labelled]] = {
    "vendor tokens": VENDOR_ROWS,
    "cloud credentials (Azure, AWS, GCP, Docker)": CLOUD_ROWS,
    "developer and SaaS tokens": SAAS_ROWS,
    "assigned secrets, URLs, keys": CREDENTIAL_ROWS,
    "identifiers": PII_ROWS,
    "national ids with check digits": NATIONAL_ROWS,
    "phones": PHONE_ROWS,
    "prose (unchanged)": PROSE_ROWS,
}
# Strings shaped like a secret or an identifier that are not one (a failing checksum, a placeholder, a value far
# from its vendor's name): each must come out unchanged.
NEGATIVES: list[Labelled] = [
    *NEAR_MISS_ROWS,
    *(Labelled(f"cloud:{name}", text) for name, text in CLOUD_NEAR_MISSES),
    *(Labelled(f"saas:{name}", text) for name, text in SAAS_NEAR_MISSES),
]


def load_anchor(commit: str) -> ModuleType | None:
    """`pipeline/scrub` at `commit` as a package of its own (`scrub_anchor`), or None without git."""
    try:
        archive = subprocess.run(
            ["git", "archive", commit, "pipeline/scrub"], cwd=ROOT, capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    folder = Path(tempfile.mkdtemp(prefix="tm-scrub-anchor-")) / "scrub_anchor"
    folder.mkdir()
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar.getmembers():
            if member.isfile():
                source = tar.extractfile(member)
                assert source is not None
                text = source.read().decode().replace("pipeline.scrub", "scrub_anchor")
                (folder / Path(member.name).name).write_text(text, encoding="utf-8")
    sys.path.insert(0, str(folder.parent))
    return importlib.import_module("scrub_anchor")


def pages(root: Path) -> list[tuple[str, str]]:
    return [(str(p.relative_to(root)), p.read_text(encoding="utf-8")) for p in sorted(root.rglob("*.md"))]


def report_recall() -> bool:
    spec = Policy.spec_compatible()
    print(f"{'class':42s} {'rows':>5s} {'default':>8s} {'spec':>8s}")
    ok = True
    for title, rows in TABLES.items():
        default, before = recall(rows), recall(rows, spec)
        caught = sum(c for c, _ in default.values())
        total = sum(t for _, t in default.values())
        print(f"-- {title}: {caught}/{total} = {caught / total:.1%}")
        for label in sorted(default):
            (c, t), (s, _) = default[label], before[label]
            flag = "" if c / t >= TARGET_RECALL else "   < target"
            ok = ok and not flag
            print(f"   {label:39s} {t:5d} {c / t:8.1%} {s / t:8.1%}{flag}")
            emit("recall", table_of=title, label=label, rows=t, default=c / t, spec=s / t)
    return report_negatives() and ok


def report_negatives() -> bool:
    """The share of near misses the default rules alter (each should come out unchanged)."""
    kept = recall(NEGATIVES)
    altered = sum(t - c for c, t in kept.values())
    share = altered / len(NEGATIVES)
    print(
        f"-- near misses altered: {altered} of {len(NEGATIVES)} = {share:.1%}  target <= {TARGET_NEGATIVES_ALTERED:.0%}"
    )
    for label in sorted(kept):
        c, t = kept[label]
        if c < t:
            print(f"   {label:39s} {t - c:5d} of {t} altered")
    emit("negatives", rows=len(NEGATIVES), altered=altered, share=share)
    return share <= TARGET_NEGATIVES_ALTERED


def changed_lines(before: str, after: str) -> list[str]:
    return [
        f"{a.strip()[:110]}  =>  {b.strip()[:110]}"
        for a, b in zip(before.splitlines(), after.splitlines(), strict=False)
        if a != b
    ]


def report_prose(corpus: list[tuple[str, str]], scrubbers: dict[str, Scrub], sample: int) -> bool:
    ok = True
    for name, scrub in scrubbers.items():
        changed = [(path, text, scrub(text)) for path, text in corpus]
        changed = [c for c in changed if c[1] != c[2]]
        share = len(changed) / len(corpus)
        target = f"  target <= {TARGET_CHANGED:.1%}" if name == "default" else ""
        print(f"{name:10s} {len(changed):5d} of {len(corpus)} pages changed = {share:.2%}{target}")
        emit("prose", scrubber=name, changed=len(changed), pages=len(corpus), share=share)
        if name == "default":
            ok = share <= TARGET_CHANGED
            for path, before, after in changed[:sample]:
                for line in changed_lines(before, after)[:3]:
                    print(f"   {path}: {line}")
    return ok


def report_throughput(corpus: list[tuple[str, str]], scrubbers: dict[str, Scrub], repeat: int) -> bool:
    """CPU time per scrubber, the scrubbers taking turns on each page so that whatever else the machine
    does weighs on all of them alike."""
    texts = [text for _, text in corpus]
    size = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts) / 1e6
    spent = dict.fromkeys(scrubbers, 0)
    order = list(scrubbers.items())
    clock = time.process_time_ns
    for round_ in range(repeat):
        for n, text in enumerate(texts):
            turn = (n + round_) % len(order)
            for name, scrub in order[turn:] + order[:turn]:
                started = clock()
                scrub(text)
                spent[name] += clock() - started
    seconds = {name: ns / 1e9 / repeat for name, ns in spent.items()}
    anchor = seconds.get("anchor", seconds["spec"])
    for name, took in seconds.items():
        rate = size / took
        print(f"{name:10s} {rate:6.2f} MB/s  ({took:.3f} s CPU for {size:.2f} MB)  ratio {anchor / took:.2f}")
        emit("throughput", scrubber=name, mb_per_s=rate, cpu_s=took, ratio=anchor / took)
    return seconds["default"] <= anchor * 1.05


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pages", nargs="?", type=Path, default=ROOT.parent / "shared/corpus/tldr-pages/pages")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sample", type=int, default=40, help="changed pages to show")
    parser.add_argument("--anchor", default=ANCHOR_COMMIT, help="the commit whose pipeline/scrub is today's")
    args = parser.parse_args()

    default, spec = Policy(), Policy.spec_compatible()
    scrubbers: dict[str, Scrub] = {
        "default": lambda t: sanitize_text(t, default).value,
        "spec": lambda t: sanitize_text(t, spec).value,
    }
    anchor = load_anchor(args.anchor)
    if anchor is None:
        print(f"anchor: git or commit {args.anchor} unavailable; Policy.spec_compatible() stands in for it")
    else:
        print(f"anchor: pipeline/scrub at {args.anchor}")
        scrubbers["anchor"] = lambda t: anchor.sanitize_text(t).value

    print("\n== recall on the labelled tables")
    recall_ok = report_recall()
    corpus = pages(args.pages)
    print(f"\n== prose: {args.pages}")
    prose_ok = report_prose(corpus, {k: v for k, v in scrubbers.items() if k != "spec"}, args.sample)
    print(f"\n== throughput ({args.repeat} rounds, CPU time, taking turns page by page)")
    speed_ok = report_throughput(corpus, scrubbers, args.repeat)
    print(f"\ntargets: recall {'met' if recall_ok else 'MISSED'}, prose {'met' if prose_ok else 'MISSED'}, "
          f"throughput {'met' if speed_ok else 'MISSED'}")  # fmt: skip


if __name__ == "__main__":
    main()
