"""Benchmark of the network sources: requests and seconds of a first sync, an unchanged one, incremental ones.

    .venv/bin/python bench/sources.py [--pages 200] [--entries 500] [--files 5000] [--changes 10 100]
                                      [--workers N] [--quick]

Everything runs in this process: the loopback servers of the tests (`tests.fixtures.web_site.WebSite`,
`tests.fixtures.github_fake.FakeGitHub` over a repository made with git) and one `EmbeddedRuntime` on a fresh
data directory (`allow_private_networks` on, `github_api_url` the fake's). A one-page link source is synced
before the clock, so no case pays for starting the converter and text pools. Each sync is timed on its own,
from the call to the last stored batch; the servers count what they were asked meanwhile.
  link      a sitemap of `--pages` pages (each with an ETag): the first sync, then an unchanged one;
  rss       one feed of `--entries` entries (with an ETag; the source configured with `max_items` to match):
            the first sync, then an unchanged one;
  github    a repository of `--files` small files in folders of 100: the first sync, then an incremental
            sync after each commit of `--changes` files (8 in 10 modified, 1 added, 1 removed).
It prints one table of every sync (requests, seconds, items stored and forgotten; each case's first sync is
the anchor its later syncs' requests and seconds are divided by), the GitHub requests per route, then the
checks, and exits 1 when one fails:
  first      every page, entry or file stored, none failed;
  unchanged  nothing read, stored or forgotten, and each page, or the feed, asked exactly once, with a
             conditional request answered 304 (the sitemap is asked once more: it is no unit of the source);
  commits    one blob read per file with new content, one deletion per removed file, and besides the blobs
             one comparison and, per job (the listing and each batch), no more requests than the first sync
             made per job: what an incremental sync asks grows with the change, not with the repository.
`--quick` is 50 pages, 100 entries and 1,000 files.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from hashlib import sha256
from pathlib import Path

# Run as a script, this file's folder is first on the path, where this very file would shadow the `sources`
# package; the repository root before it finds the package first, and `tests` (no installed package) too.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _report import emit

from sources import SourceRequest
from tests.fixtures.github_fake import FakeGitHub, GitRepo
from tests.fixtures.web_site import Page, WebSite, html, sitemap_xml
from worker.control import add_source
from worker.embedded.runtime import EmbeddedRuntime
from worker.records import BatchReport, SyncReport
from worker.settings import Settings

FULL = (200, 500, 5_000)
QUICK = (50, 100, 1_000)
CHANGES = (10, 100)
FOLDER_SIZE = 100
REPO = "acme/bench"
FEED = "/feed.xml"
SITEMAP = "/sitemap.xml"
WARM_PAGE = "/warm-up"
START = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
ROUTES = ("repo", "branch", "tree", "compare", "blob")  # the routes a sync of files asks; others print after


@dataclass(frozen=True)
class Step:
    """One timed sync: what it reported and what the server was asked meanwhile (path or route → count)."""

    label: str
    seconds: float
    sync: SyncReport
    batches: list[BatchReport]
    requests: Counter[str]

    @property
    def asked(self) -> int:
        return sum(self.requests.values())

    @property
    def stored(self) -> int:
        return sum(b.stored for b in self.batches)

    @property
    def forgotten(self) -> int:
        return sum(b.forgotten for b in self.batches)

    @property
    def failed(self) -> int:
        return sum(b.failed for b in self.batches)


@dataclass(frozen=True)
class Check:
    """One verdict the run prints; a failed one makes the run exit 1."""

    case: str
    ok: bool
    text: str


Counts = Callable[[], Counter[str]]


async def timed(
    runtime: EmbeddedRuntime, source_id: str, label: str, counts: Counts, reset: Callable[[], None]
) -> Step:
    """Sync `source_id` once, with the server's counts reset before and read after."""
    gc.collect()
    reset()
    started = time.perf_counter()
    sync, batches = await runtime.sync(source_id)
    seconds = time.perf_counter() - started
    return Step(label, seconds, sync, batches, Counter(counts()))


# -- the web site: pages, a sitemap, a feed -------------------------------------------------------------


def page_path(n: int) -> str:
    return f"/pages/{n:04}"


def site_pages(site: WebSite, pages: int, entries: int) -> None:
    """`pages` pages with a sitemap listing them, one feed of `entries` entries, and the warm-up page."""
    for n in range(pages):
        text = f"Page {n} describes the basalt column number {n} and how it cooled. " * 20
        site.pages[page_path(n)] = Page(html(f"Page {n}", text), etag=f'"page-{n}-v1"')
    urls = [site.url(page_path(n)) for n in range(pages)]
    site.pages[SITEMAP] = Page(sitemap_xml(urls), content_type="application/xml")
    site.pages[FEED] = feed(entries)
    site.pages[WARM_PAGE] = Page(html("Warm-up", "a page synced before the clock"), etag='"warm"')


def feed(entries: int) -> Page:
    """An RSS 2.0 feed of `entries` entries with an ETag made from its body."""
    items = "".join(entry_xml(n) for n in range(entries))
    body = (
        f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>News</title>{items}</channel></rss>'
    )
    etag = f'"{sha256(body.encode()).hexdigest()[:16]}"'
    return Page(body, content_type="application/rss+xml; charset=utf-8", etag=etag)


def entry_xml(n: int) -> str:
    stamp = format_datetime(START + timedelta(hours=n), usegmt=True)
    text = f"Entry {n} reports on the quokka colony number {n}: its count, its burrows, its season. " * 4
    return (
        f"<item><guid>tag:news.example,2025:post-{n:04}</guid><title>Post {n}</title>"
        f"<link>https://news.example/posts/{n}</link><pubDate>{stamp}</pubDate>"
        f"<description>&lt;p&gt;{text}&lt;/p&gt;</description></item>"
    )


def counts_of(server: WebSite | FakeGitHub) -> Counts:
    """What `server` was asked so far, per path (the web site) or per route (the fake GitHub)."""
    return lambda: server.requests


async def link_case(runtime: EmbeddedRuntime, site: WebSite, pages: int) -> tuple[list[Step], list[Check]]:
    request = SourceRequest(kind="link", target=site.url(SITEMAP), sitemap=True, id="bench-link")
    source_id = add_source(runtime.state, request).id
    first = await timed(runtime, source_id, "first sync", counts_of(site), site.reset_counts)
    unchanged = await timed(runtime, source_id, "unchanged sync", counts_of(site), site.reset_counts)
    paths = [page_path(n) for n in range(pages)]
    checks = [
        stored_check("link", first, pages),
        unchanged_check("link", unchanged, site, paths, "page", f"; the sitemap {unchanged.requests[SITEMAP]} time"),
    ]
    return [first, unchanged], checks


async def rss_case(runtime: EmbeddedRuntime, site: WebSite, entries: int) -> tuple[list[Step], list[Check]]:
    request = SourceRequest(kind="rss", target=site.url(FEED), id="bench-rss", max_items=entries)
    source_id = add_source(runtime.state, request).id
    first = await timed(runtime, source_id, "first sync", counts_of(site), site.reset_counts)
    unchanged = await timed(runtime, source_id, "unchanged sync", counts_of(site), site.reset_counts)
    return [first, unchanged], [
        stored_check("rss", first, entries),
        unchanged_check("rss", unchanged, site, [FEED], "feed"),
    ]


def stored_check(case: str, first: Step, expected: int) -> Check:
    ok = first.stored == expected and first.failed == 0
    return Check(case, ok, f"first sync: {first.stored:,} items stored of {expected:,} expected, {first.failed} failed")


def unchanged_check(case: str, step: Step, site: WebSite, paths: Sequence[str], what: str, extra: str = "") -> Check:
    """Nothing read or stored, and each of `paths` asked exactly once, conditionally, and answered 304."""
    answers = Counter((step.requests[p], site.conditional[p], site.not_modified[p]) for p in paths)
    untouched = (step.sync.upserts, step.sync.deletes, len(step.batches)) == (0, 0, 0)
    conditional = sorted({site.conditional[p] for p in paths})
    per_unit = str(conditional[0]) if len(conditional) == 1 else f"{conditional[0]} to {conditional[-1]}"
    seen = ", ".join(
        f"{n:,} asked {r}× ({c} conditional, {m} answered 304)" for (r, c, m), n in sorted(answers.items())
    )
    return Check(
        case,
        untouched and answers == Counter({(1, 1, 1): len(paths)}),
        f"unchanged sync: {step.sync.upserts} read, {step.sync.deletes} deleted, {len(step.batches)} batches; "
        f"{len(paths):,} {what}{'s' if len(paths) > 1 else ''}: {seen}{extra}; "
        f"conditional requests per {what} = {per_unit}",
    )


# -- the repository ---------------------------------------------------------------------------------------


def file_path(n: int) -> str:
    return f"docs/part-{n // FOLDER_SIZE:03}/note-{n:05}.md"


def file_text(n: int, version: int) -> str:
    return f"# Note {n}\n\nVersion {version} of the note on granite slab {n}, its grain and its quarry.\n"


def fresh_text(n: int) -> str:
    # Unlike any other file's text, so git takes no added file for a rename of a removed one.
    words = " ".join(sha256(f"{n}-{k}".encode()).hexdigest()[:8] for k in range(12))
    return f"# Fresh {n}\n\n{words}\n"


def build_repo(path: Path, files: int) -> GitRepo:
    """A repository of `files` markdown files in folders of 100, in one commit."""
    repo = GitRepo.create(path)
    repo.write_many({file_path(n): file_text(n, 1) for n in range(files)})
    repo.commit(f"{files} files")
    return repo


def spread(present: Sequence[int], count: int) -> list[int]:
    """`count` of `present` spread evenly over it: the same ones every run."""
    return [present[(2 * k + 1) * len(present) // (2 * count)] for k in range(count)]


@dataclass(frozen=True)
class Change:
    """How many files one commit modified, added and removed."""

    modified: int
    added: int
    removed: int

    @property
    def readable(self) -> int:
        """Files with new content: one blob each to read."""
        return self.modified + self.added


@dataclass
class Commits:
    """Commits of a chosen size on the benchmark repository, tracking which files it holds."""

    repo: GitRepo
    present: list[int]
    next_new: int

    def commit(self, size: int, version: int) -> Change:
        """A commit touching `size` files: 8 in 10 modified, 1 added, 1 removed (at least one of each)."""
        added = removed = max(1, size // 10)
        chosen = spread(self.present, size - added)
        modified, gone = chosen[: size - added - removed], chosen[size - added - removed :]
        for n in modified:
            self.repo.write(file_path(n), file_text(n, version))
        for n in gone:
            self.repo.remove(file_path(n))
        fresh = list(range(self.next_new, self.next_new + added))
        for n in fresh:
            self.repo.write(file_path(n), fresh_text(n))
        self.next_new += added
        self.present = sorted(set(self.present) - set(gone) | set(fresh))
        self.repo.commit(f"{size} files")
        return Change(len(modified), added, removed)


def others(step: Step) -> int:
    """The requests that are not blobs: what a sync costs besides reading files."""
    return step.asked - step.requests["blob"]


def jobs(step: Step) -> int:
    """The listing and each batch: every job builds a reader of its own, which asks for the head and tree."""
    return step.sync.batches + 1


def incremental_check(step: Step, change: Change, size: int, first: Step) -> Check:
    """One blob per file with new content, and besides them the first sync's cost per job and a comparison."""
    per_job, compared = others(first) / jobs(first), step.requests["compare"]
    reads_ok = step.requests["blob"] == change.readable == step.stored == step.sync.upserts
    fixed_ok = compared == 1 and others(step) <= per_job * jobs(step) + 1
    return Check(
        "github",
        reads_ok and fixed_ok and step.sync.deletes == change.removed,
        f"{step.label}: {step.requests['blob']} blobs read for {change.readable} files with new content "
        f"({change.modified} modified, {change.added} added), {step.sync.deletes} deleted of {change.removed} "
        f"removed; besides the blobs {compared} comparison and {others(step) - compared} "
        f"requests in {jobs(step)} jobs (the first sync: {per_job:.1f} per job): {step.asked / size:.2f} requests "
        "per file the commit touched, none that grows with the repository",
    )


async def github_case(
    runtime: EmbeddedRuntime, fake: FakeGitHub, repo: GitRepo, files: int, changes: Sequence[int]
) -> tuple[list[Step], list[Check]]:
    source_id = add_source(runtime.state, SourceRequest(kind="github", target=REPO, id="bench-github")).id
    counts = counts_of(fake)
    first = await timed(runtime, source_id, "first sync", counts, fake.reset_counts)
    steps, checks = [first], [stored_check("github", first, files)]
    commits = Commits(repo, list(range(files)), files)
    for version, size in enumerate(changes, start=2):
        change = commits.commit(size, version)
        step = await timed(runtime, source_id, f"after a {size}-file commit", counts, fake.reset_counts)
        steps.append(step)
        checks.append(incremental_check(step, change, size, first))
    return steps, checks


# -- printing --------------------------------------------------------------------------------------------


def table(rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def ratio(a: float, b: float) -> str:
    return "—" if b <= 0 else f"{a / b:.3f}"


def print_steps(cases: dict[str, list[Step]]) -> None:
    header = ["case", "sync", "requests", "seconds", "stored", "forgotten", "requests/first", "seconds/first"]
    table([header, *(step_row(case, step, steps[0]) for case, steps in cases.items() for step in steps)])


def step_row(case: str, step: Step, anchor: Step) -> list[str]:
    first = step is anchor
    emit(
        "syncs",
        case=case,
        sync=step.label,
        requests=step.asked,
        seconds=step.seconds,
        stored=step.stored,
        forgotten=step.forgotten,
        first_requests=anchor.asked,
        first_seconds=anchor.seconds,
    )
    return [
        case,
        step.label,
        f"{step.asked:,}",
        f"{step.seconds:.3f} s",
        f"{step.stored:,}",
        f"{step.forgotten:,}",
        "anchor" if first else ratio(step.asked, anchor.asked),
        "anchor" if first else ratio(step.seconds, anchor.seconds),
    ]


def print_routes(steps: list[Step]) -> None:
    routes = [*ROUTES, *sorted({r for s in steps for r in s.requests} - set(ROUTES))]
    rows = [["github sync", *routes, "total"]]
    rows += [[s.label, *(f"{s.requests[r]:,}" for r in routes), f"{s.asked:,}"] for s in steps]
    table(rows)


def load_line(when: str) -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {when}: {one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} CPUs)"


# -- main --------------------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=None, help=f"pages in the sitemap (default {FULL[0]})")
    parser.add_argument("--entries", type=int, default=None, help=f"entries in the feed (default {FULL[1]})")
    parser.add_argument("--files", type=int, default=None, help=f"files in the repository (default {FULL[2]:,})")
    parser.add_argument("--changes", type=int, nargs="+", default=list(CHANGES), help="files of each commit")
    parser.add_argument("--workers", type=int, default=None, help="converter processes (default: CPUs, at most 4)")
    parser.add_argument(
        "--quick", action="store_true", help=f"defaults of {QUICK[0]} pages, {QUICK[1]} entries, {QUICK[2]:,} files"
    )
    args = parser.parse_args()
    defaults = QUICK if args.quick else FULL
    args.pages, args.entries, args.files = (
        given if given is not None else default
        for given, default in zip((args.pages, args.entries, args.files), defaults, strict=True)
    )
    if min(args.pages, args.entries, args.files, *args.changes) < 1 or max(args.changes) * 2 > args.files:
        parser.error("every count must be positive, and each commit at most half the repository")
    return args


@dataclass(frozen=True)
class Servers:
    """The loopback servers and the repository the fake GitHub serves (the commits go to it)."""

    site: WebSite
    fake: FakeGitHub
    repo: GitRepo


def serve(stack: ExitStack, work: Path, args: argparse.Namespace) -> Servers:
    """The web site and the fake GitHub with their contents, listening until `stack` closes."""
    started = time.perf_counter()
    site = stack.enter_context(WebSite())
    site_pages(site, args.pages, args.entries)
    repo = build_repo(work / "repo", args.files)
    fake = stack.enter_context(FakeGitHub())
    fake.add_repo(REPO, repo)
    print(f"fixtures ready in {time.perf_counter() - started:.1f} s (not timed): {site.url()}, {fake.url}", flush=True)
    return Servers(site, fake, repo)


async def run(
    servers: Servers, settings: Settings, args: argparse.Namespace
) -> tuple[dict[str, list[Step]], list[Check]]:
    with EmbeddedRuntime(settings) as runtime:
        runtime.converter.warm(wait=True)
        warm = add_source(runtime.state, SourceRequest(kind="link", target=servers.site.url(WARM_PAGE), id="warm"))
        await runtime.sync(warm.id)
        link, link_checks = await link_case(runtime, servers.site, args.pages)
        rss, rss_checks = await rss_case(runtime, servers.site, args.entries)
        github, github_checks = await github_case(runtime, servers.fake, servers.repo, args.files, args.changes)
        return {"link": link, "rss": rss, "github": github}, [*link_checks, *rss_checks, *github_checks]


def main() -> int:
    args = parse_args()
    logging.basicConfig(level=logging.ERROR)
    print(load_line("at start"), flush=True)
    print(
        f"link: {args.pages:,} pages in a sitemap | rss: {args.entries:,} entries in one feed | "
        f"github: {args.files:,} files, commits of {', '.join(map(str, args.changes))} files",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="tm-bench-sources-") as scratch, ExitStack() as stack:
        work = Path(scratch)
        servers = serve(stack, work, args)
        settings = Settings(data_dir=work / "data", allow_private_networks=True, github_api_url=servers.fake.url)
        if args.workers:
            settings = settings.model_copy(update={"convert_workers": args.workers})
        print(f"embedded runtime, converter processes: {settings.convert_workers}", flush=True)
        cases, checks = asyncio.run(run(servers, settings, args))
    print()
    print_steps(cases)
    print()
    print_routes(cases["github"])
    print()
    for check in checks:
        print(f"{check.case}: {check.text}  [{'OK' if check.ok else 'FAIL'}]")
    print(load_line("at end"))
    return 0 if all(check.ok for check in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
