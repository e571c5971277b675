"""The console in a real browser (Playwright driving Debian's Chromium, headless) against `tinymemory up`:
log in, add a folder, watch its backfill reach 100% live, search and open a hit, replay a dead letter, erase
the source and see its receipt, and a read-only token that sees no action and whose POSTs are refused.

Each page is saved as a screenshot in a temporary folder; the run says where (look at them).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures.documents import corrupt_pdf_bytes, pdf_bytes
from tests.fixtures.processes import served_url
from worker.control import add_token

playwright_api = pytest.importorskip("playwright.sync_api", reason="Playwright is a dev dependency: make install")
Page = playwright_api.Page
expect = playwright_api.expect

pytestmark = pytest.mark.e2e

FILES = 120


def _chromium() -> str:
    for candidate in (os.environ.get("TINYMEMORY_CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium"):
        if candidate and Path(candidate).exists():
            return candidate
    pytest.skip("no Chromium to drive: `apt-get install chromium` (make test installs it where it can)")


@dataclass
class Console:
    url: str
    admin: str
    reader: str
    library: Path
    shots: Path


def _library(root: Path) -> Path:
    """A folder of notes, one holding a secret beside a rare word, and a PDF that cannot be read."""
    root.mkdir()
    for n in range(FILES):
        (root / f"note-{n:03}.md").write_text(f"# Note {n}\n\nField note {n} about the marsh and its birds.\n")
    (root / "vault.md").write_text("# Vault\n\nThe quokkafruit stash; password: hunter22 opens it.\n")
    (root / "report.pdf").write_bytes(corrupt_pdf_bytes())
    return root


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Console]:
    root = tmp_path_factory.mktemp("console")
    data = root / "data"
    data.mkdir()
    watched = root / "watched"
    watched.mkdir()
    (watched / "hello.md").write_text("# Hello\n\nThe console test's watched folder.\n")
    admin = add_token(data / "tokens.json", "ops", admin=True).token
    reader = add_token(data / "tokens.json", "auditor", read_only=True).token
    env = {**os.environ, "TINYMEMORY_DATA_DIR": str(data), "TINYMEMORY_API_PORT": "0"}
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("tinymemory")), "up", str(watched)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    shots = root / "screenshots"
    shots.mkdir()
    try:
        yield Console(served_url(process, within_s=90.0), admin, reader, _library(root / "library"), shots)
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            _, rest = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            _, rest = process.communicate()
        # Said past pytest's capture, so a passing run says it too.
        capture = request.config.pluginmanager.getplugin("capturemanager")
        with capture.global_and_fixture_disabled():
            print(f"\nconsole screenshots: {shots}")
        assert "Traceback" not in rest, rest


@pytest.fixture(scope="module")
def browser(console: Console) -> Iterator[object]:
    executable = _chromium()
    with playwright_api.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=executable, headless=True, args=["--no-sandbox"])
        yield launched
        launched.close()


def _shot(page: Page, console: Console, name: str) -> None:
    page.screenshot(path=str(console.shots / f"{name}.png"), full_page=True)


def _log_in(browser: object, console: Console, token: str) -> Page:
    context = browser.new_context(base_url=console.url)  # type: ignore[attr-defined]
    page: Page = context.new_page()
    page.goto("/sources")
    expect(page).to_have_url(re.compile(r"/login\?next=/sources$"))
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(r"/sources$"))
    return page


def _log_in_by_keyboard(browser: object, console: Console, token: str) -> Page:
    """The login form with the keyboard alone: the token field has the focus, Enter sends it."""
    context = browser.new_context(base_url=console.url)  # type: ignore[attr-defined]
    page: Page = context.new_page()
    page.goto("/login?next=/sources")
    assert page.evaluate("document.activeElement.id") == "token"
    page.keyboard.type(token)
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/sources$"))
    return page


# The WCAG contrast ratio of each element's text on the background it sits on, computed by the browser.
_CONTRASTS = """(selectors) => {
  const rgb = (c) => c.match(/[\\d.]+/g).slice(0, 4).map(Number);
  const lum = ([r, g, b]) => [r, g, b]
    .map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
    .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
  const behind = (el) => { for (; el; el = el.parentElement) { const c = rgb(getComputedStyle(el).backgroundColor);
    if (c.length < 4 || c[3] > 0) return c; } return [255, 255, 255]; };
  return selectors.flatMap((s) => [...document.querySelectorAll(s)].slice(0, 3).map((el) => {
    const [a, b] = [lum(rgb(getComputedStyle(el).color)), lum(behind(el))];
    return [s, (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)]; }));
}"""


def _wait_done(page: Page, source_id: str) -> None:
    """Wait on the progress page, without reloading it, until the source's newest run is done."""
    page.evaluate("window.__stayed = true")
    run = page.locator("li.run", has_text=source_id).first
    expect(run.locator("progress")).to_have_attribute("value", "100", timeout=90_000)
    expect(run.locator(".state")).to_have_text("done", timeout=90_000)
    assert page.evaluate("window.__stayed") is True  # the page was redrawn in place, not reloaded


def _search(page: Page, query: str) -> None:
    page.goto("/search")
    page.get_by_label("Query").fill(query)
    page.get_by_role("button", name="Search").click()


def test_an_admin_adds_a_folder_watches_it_sync_searches_and_replays_a_dead_letter(
    console: Console, browser: object
) -> None:
    page = _log_in(browser, console, console.admin)
    _shot(page, console, "01-sources")
    page.get_by_label("Kind").select_option("folder")
    page.get_by_label("Path or URL").fill(str(console.library))
    page.get_by_label("Id (optional)").fill("library")
    page.get_by_role("button", name="Add and sync").click()
    expect(page).to_have_url(re.compile(r"/progress$"))
    expect(page.get_by_role("status")).to_contain_text("added library")
    _wait_done(page, "library")
    assert page.locator("#live").get_attribute("data-updated") is not None  # the script redrew it live
    expect(page.locator("li.run", has_text="library").first).to_contain_text(f"{FILES + 1} of {FILES + 2} units")
    _shot(page, console, "02-progress")

    page.goto("/sources")
    row = page.locator("tr", has_text="library")
    expect(row).to_contain_text(str(console.library))
    expect(row.locator("td.num").last).to_have_text("1")  # the unreadable PDF
    _search(page, "quokkafruit")
    hit = page.locator("ol.hits a.hit-title").first
    expect(hit).to_contain_text("vault.md")
    expect(page.locator("ol.citations a").first).to_contain_text("[1]")
    _shot(page, console, "03-search")
    hit.click()
    expect(page).to_have_url(re.compile(r"/items/"))
    expect(page.locator("pre.stored")).to_contain_text("quokkafruit")
    expect(page.locator("pre.stored mark.redacted")).to_have_text("[REDACTED]")
    assert "hunter22" not in page.locator("pre.stored").inner_text()
    _shot(page, console, "04-item")

    page.goto("/dead-letters")
    letter = page.locator("tr", has_text="report.pdf")
    expect(letter).to_contain_text("convert")
    _shot(page, console, "05-dead-letters")
    (console.library / "report.pdf").write_bytes(pdf_bytes(["The pelicanfish survey, fixed."]))
    letter.get_by_role("button", name=re.compile("^Replay")).click()
    expect(page).to_have_url(re.compile(r"/progress$"))
    _wait_done(page, "library")
    page.goto("/dead-letters")
    expect(page.locator("tr", has_text="report.pdf")).to_have_count(0)
    _search(page, "pelicanfish")
    expect(page.locator("ol.hits a.hit-title").first).to_contain_text("report.pdf")

    page.goto("/explore")
    expect(page.locator("ul.bars")).to_contain_text("document")
    page.locator("ul.bars a", has_text="document").click()
    expect(page).to_have_url(re.compile(r"facet=source.*kind=document"))
    expect(page.locator("ul.bars")).to_contain_text("library")
    _shot(page, console, "06-explore")


def test_a_read_only_token_sees_no_action_and_its_posts_are_refused(console: Console, browser: object) -> None:
    page = _log_in_by_keyboard(browser, console, console.reader)
    expect(page.locator(".who")).to_contain_text("auditor (read-only)")
    expect(page.locator("table")).to_contain_text("library")
    expect(page.get_by_role("button", name=re.compile("Sync now|Disable|Add and sync|Replay"))).to_have_count(0)
    expect(page.get_by_role("link", name="Erasures")).to_have_count(0)
    _shot(page, console, "07-read-only-sources")
    elements = ["h1", "th", "td", "a", "small", ".muted", "button"]
    contrasts = page.evaluate(_CONTRASTS, elements)
    assert contrasts and all(ratio >= 4.5 for _, ratio in contrasts), contrasts  # WCAG AA for text
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    assert csrf
    for action in ("/sources/library/sync", "/dead-letters/replay", "/erasures"):
        refused = page.request.post(action, form={"csrf": csrf, "scope": "source", "target": "library"})
        assert refused.status == 403, action
    page.goto("/erasures")
    expect(page.get_by_role("alert")).to_contain_text("admin token")


def test_an_admin_erases_the_source_and_reads_its_receipt(console: Console, browser: object) -> None:
    page = _log_in(browser, console, console.admin)
    page.goto("/erasures")
    page.get_by_label("a source").check()
    page.get_by_label("Source id or namespace", exact=True).fill("library")
    page.get_by_label("Type the source id or namespace again to confirm").fill("library")
    _shot(page, console, "08-erasure-form")
    page.get_by_role("button", name="Erase for good").click()
    expect(page).to_have_url(re.compile(r"/erasures/[0-9a-f]+$"))
    deadline = time.monotonic() + 60
    while "completed" not in page.locator("#erasure-status").inner_text() and time.monotonic() < deadline:
        time.sleep(0.5)
        page.reload()
    expect(page.locator("#erasure-status")).to_have_text("completed")
    expect(page.locator("#erasure-check")).to_contain_text("passed: nothing left")
    _shot(page, console, "09-erasure-receipt")
    _search(page, "quokkafruit")
    expect(page.locator("ol.hits")).to_have_count(0)
    expect(page.get_by_text("Nothing matched.")).to_be_visible()
    page.goto("/erasures")
    expect(page.locator("tr[data-erasure]").first).to_contain_text("source library")


def test_the_console_works_with_javascript_off(console: Console, browser: object) -> None:
    context = browser.new_context(base_url=console.url, java_script_enabled=False)  # type: ignore[attr-defined]
    page: Page = context.new_page()
    page.goto("/login?next=/search")
    page.get_by_label("Token").fill(console.admin)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(r"/search$"))
    page.get_by_label("Query").fill("console test")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("ol.hits a.hit-title").first).to_contain_text("hello.md")
    page.goto("/progress")
    expect(page.get_by_role("link", name="reload")).to_be_visible()  # the noscript way to follow progress
    page.goto("/sources")
    row = page.locator("tr", has_text="watched")
    row.get_by_role("button", name=re.compile("^Disable")).click()
    expect(page.get_by_role("status")).to_contain_text("is disabled")
    page.locator("tr", has_text="watched").get_by_role("button", name=re.compile("^Enable")).click()
    expect(page.get_by_role("status")).to_contain_text("is enabled")
