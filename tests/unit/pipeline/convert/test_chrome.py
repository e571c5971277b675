"""HTML without its navigation chrome, and pages from a web URL converted by markitdown's site-aware converters.

A Wikipedia-like page and a search results page are written here; each rule of `chrome` has a vector of
what must survive and what must go.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from pipeline.convert import ConverterPool, ConvertLimits, RawDocument, convert_document
from pipeline.convert.chrome import without_chrome

ARTICLE_FACTS = (
    "The **grey heron** (*Ardea cinerea*) is a long-legged wading bird",
    "It feeds in shallow water, spearing fish with its long bill.",
    "## Distribution",
    "Herons breed across [Europe](/wiki/Europe",
)
WIKI_CHROME = (
    "Jump to content",
    "move to sidebar",
    "hide",
    "Main page",
    "Donate",
    "You are encouraged to create an account",
    "Create account",
    "Log in",
    "58 languages",
    "Afrikaans",
    "Deutsch",
    "Français",
    "Privacy policy",
    "Search Wikipedia",
)

WIKIPEDIA_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="UTF-8"><title>Grey heron - Wikipedia</title>
<style>.x { color: red }</style><script>var wg = 1;</script></head>
<body class="skin-vector">
<a class="mw-jump-link" href="#bodyContent">Jump to content</a>
<div class="vector-header-container"><header class="vector-header mw-header">
  <nav class="vector-main-menu-landmark" role="navigation" aria-label="Site">
    <div class="vector-pinnable-header"><div class="vector-pinnable-header-label">Main menu</div>
      <button class="vector-pinnable-header-pin-button">move to sidebar</button>
      <button class="vector-pinnable-header-unpin-button">hide</button></div>
    <ul><li id="n-mainpage"><a href="/wiki/Main_Page">Main page</a></li></ul>
  </nav>
  <div role="search"><form action="/w/index.php" id="searchform"><input name="search"
    placeholder="Search Wikipedia"><button>Search</button></form></div>
  <nav class="vector-user-links" role="navigation">
    <ul><li id="pt-sitesupport-2"><a href="https://donate.wikimedia.org/">Donate</a></li>
    <li id="pt-createaccount-2"><a href="/w/index.php?title=Special:CreateAccount"
      title="You are encouraged to create an account and log in; however, it is not mandatory">Create account</a></li>
    <li id="pt-login-2"><a href="/w/index.php?title=Special:UserLogin">Log in</a></li></ul>
  </nav>
</header></div>
<div class="mw-page-container"><main id="content" class="mw-body" role="main">
  <header class="mw-body-header vector-page-titlebar">
    <h1 id="firstHeading" class="firstHeading"><span class="mw-page-title-main">Grey heron</span></h1>
    <div id="p-lang-btn" class="vector-dropdown mw-portlet mw-portlet-lang">
      <label id="p-lang-btn-label" aria-hidden="true"><span>58 languages</span></label>
      <div class="vector-dropdown-content"><ul class="vector-menu-content-list">
        <li class="interlanguage-link interwiki-af"><a href="https://af.wikipedia.org/wiki/Bloureier" hreflang="af"
          lang="af">Afrikaans</a></li>
        <li class="interlanguage-link interwiki-de"><a href="https://de.wikipedia.org/wiki/Graureiher" hreflang="de"
          lang="de">Deutsch</a></li>
      </ul></div>
    </div>
  </header>
  <div id="bodyContent" class="vector-body">
    <div id="siteSub">From Wikipedia, the free encyclopedia</div>
    <div id="mw-content-text" class="mw-body-content"><div class="mw-parser-output">
      <p>The <b>grey heron</b> (<i>Ardea cinerea</i>) is a long-legged wading bird of the heron family.</p>
      <p>It feeds in shallow water, spearing fish with its long bill.</p>
      <h2 id="Distribution">Distribution</h2>
      <p>Herons breed across <a href="/wiki/Europe" title="Europe">Europe</a> and Asia.</p>
      <ul class="other-languages">
        <li><a href="https://fr.wikipedia.org/wiki/H%C3%A9ron_cendr%C3%A9" hreflang="fr">Français</a></li>
        <li><a href="https://nl.wikipedia.org/wiki/Blauwe_reiger" hreflang="nl">Nederlands</a></li>
        <li><a href="https://sv.wikipedia.org/wiki/Gr%C3%A5h%C3%A4ger" hreflang="sv">Svenska</a></li>
      </ul>
    </div></div>
  </div>
</main></div>
<footer id="footer" class="mw-footer" role="contentinfo">
  <ul id="footer-places"><li><a href="https://foundation.wikimedia.org/wiki/Privacy_policy">Privacy policy</a></li></ul>
</footer>
</body></html>
""".encode()


def test_a_wikipedia_page_from_its_url_keeps_the_article_and_loses_the_chrome() -> None:
    raw = RawDocument(
        WIKIPEDIA_PAGE, mime="text/html; charset=utf-8", origin="https://en.wikipedia.org/wiki/Grey_heron"
    )
    document = convert_document(raw)
    # markitdown's Wikipedia converter took it: the title from the page's title element, only the content text.
    assert document.title == "Grey heron"
    assert document.markdown.startswith("# Grey heron\n\nThe **grey heron**")
    assert "From Wikipedia, the free encyclopedia" not in document.markdown
    for fact in ARTICLE_FACTS:
        assert fact in document.markdown, fact
    for chrome in WIKI_CHROME:
        assert chrome not in document.markdown, chrome


@pytest.mark.parametrize("origin", [None, "file:///srv/en.wikipedia.org/wiki/Grey_heron", "not a url at all"])
def test_the_same_page_without_a_web_url_still_loses_the_chrome(origin: str | None) -> None:
    document = convert_document(RawDocument(WIKIPEDIA_PAGE, filename="saved/grey-heron.html", origin=origin))
    assert document.title == "Grey heron - Wikipedia"
    assert "From Wikipedia, the free encyclopedia" in document.markdown  # the generic converter keeps the body
    for fact in ARTICLE_FACTS:
        assert fact in document.markdown, fact
    for chrome in WIKI_CHROME:
        assert chrome not in document.markdown, chrome


def _bing_redirect(target: str) -> str:
    encoded = base64.urlsafe_b64encode(target.encode()).decode().rstrip("=")
    return f"https://www.bing.com/ck/a?!&amp;&amp;p=abc123&amp;u=a1{encoded}&amp;ntb=1"


SEARCH_PAGE = f"""<!DOCTYPE html><html><head><title>herons - Search</title></head><body>
<header id="b_header" role="banner"><form action="/search"><input name="q" value="herons"></form></header>
<main><div id="b_content"><ol id="b_results">
  <li class="b_algo"><h2><a href="{_bing_redirect("https://herons.example/facts")}">Heron facts</a></h2>
    <div class="b_caption" role="contentinfo"><p>Herons are <strong>wading birds</strong> with long necks.</p></div>
  </li>
  <li class="b_algo"><h2><a href="{_bing_redirect("https://birds.example/heron")}">All about herons</a></h2>
    <div class="b_caption" role="contentinfo"><p>Where herons nest and what they eat.</p></div>
  </li>
</ol></div></main>
<footer class="b_footer" role="contentinfo"><a href="/privacy">Privacy and Cookies</a></footer>
</body></html>""".encode()


def test_a_search_results_page_from_its_url_keeps_the_organic_results() -> None:
    document = convert_document(RawDocument(SEARCH_PAGE, origin="https://www.bing.com/search?q=herons"))
    text = document.markdown
    assert text.startswith("## A Bing search for 'herons' found the following results:")
    assert "[Heron facts](https://herons.example/facts)" in text
    assert "[All about herons](https://birds.example/heron)" in text
    # A result's caption is marked `contentinfo` but stands inside the page's main content: it stays.
    assert "Herons are **wading birds** with long necks." in text
    assert "https://www.bing.com/ck/a" not in text and "Privacy and Cookies" not in text


@dataclass(frozen=True)
class ChromeVector:
    id: str
    body: str
    kept: tuple[str, ...]
    removed: tuple[str, ...]


CHROME_VECTORS = (
    ChromeVector("nav", "<nav><a href='/'>Home</a></nav><p>Body text</p>", ("Body text",), ("Home",)),
    ChromeVector(
        "role-navigation", "<div role='navigation'>Sections</div><p>Body text</p>", ("Body text",), ("Sections",)
    ),
    ChromeVector(
        "controls",
        "<p>Body text</p><button>hide</button><select><option>English</option></select>",
        ("Body text",),
        ("hide", "English"),
    ),
    ChromeVector(
        "page-header-and-footer",
        "<header><p>Site banner</p></header><p>Body text</p><footer><p>Copyright site</p></footer>",
        ("Body text",),
        ("Site banner", "Copyright site"),
    ),
    ChromeVector(
        "banner-and-contentinfo-roles",
        "<div role='banner'>Site banner</div><p>Body text</p><div role='contentinfo'>Copyright site</div>",
        ("Body text",),
        ("Site banner", "Copyright site"),
    ),
    ChromeVector(
        "headers-of-content-stay",
        "<article><header><h1>Post title</h1></header><p>Body text</p><footer>Posted by Ada</footer></article>"
        "<section><header>Section lead</header></section><main><footer>Main closing</footer></main>",
        ("# Post title", "Body text", "Posted by Ada", "Section lead", "Main closing"),
        (),
    ),
    ChromeVector(
        "aria-hidden",
        "<p>Body text<span aria-hidden='TRUE'>decorative icon</span></p>",
        ("Body text",),
        ("decorative icon",),
    ),
    ChromeVector(
        "skip-links",
        "<a href='#main'>Skip to main content</a><a href='#c'><span> Jump to navigation</span></a>"
        "<a class='skip-link' href='#x'>Go</a><p>Body text, see <a href='#notes'>skip to the notes</a></p>"
        "<p><a href='/skip-to-my-lou'>Skip to my Lou</a></p>",
        ("Body text", "Skip to my Lou"),
        ("Skip to main content", "Jump to navigation", "Go", "skip to the notes"),
    ),
    ChromeVector(
        "language-lists",
        "<div id='p-lang'><h3>Languages</h3></div><ul><li class='interlanguage-link'>Dansk</li></ul>"
        "<ul><li><a hreflang='de' href='/de'>Deutsch</a></li><li><a hreflang='fr' href='/fr'>Français</a></li>"
        "<li><a hreflang='it' href='/it'>Italiano</a></li></ul>"
        "<ul><li><a hreflang='de' href='/de'>Deutsch version</a></li><li><a href='/x'>Extra reading</a></li>"
        "<li><a hreflang='fr' href='/fr'>French version</a></li></ul><p>Body text</p>",
        ("Body text", "Deutsch version", "Extra reading"),
        ("Languages", "Dansk", "Italiano", "Français"),
    ),
    ChromeVector(
        "login-prompts",
        "<ul><li id='pt-login'><a href='/login'>Log in</a></li><li id='pt-createaccount'>Create account</li></ul>"
        "<form action='https://id.example/signin?next=/'><label>Email</label></form>"
        "<form action='/account/Sign-Up'><label>Join us</label></form>"
        "<form action='/search'><label>Find a bird</label></form>"
        "<p>Body text: how to <a href='/login'>log in</a> to the hide.</p>",
        ("Body text", "log in", "Find a bird"),
        ("Log in", "Create account", "Email", "Join us"),
    ),
)


@pytest.mark.parametrize("vector", CHROME_VECTORS, ids=[v.id for v in CHROME_VECTORS])
def test_each_rule(vector: ChromeVector) -> None:
    page = f"<html><head><title>Rule</title></head><body>{vector.body}</body></html>".encode()
    text = convert_document(RawDocument(page, filename="rule.html")).markdown
    for kept in vector.kept:
        assert kept in text, kept
    for removed in vector.removed:
        assert removed not in text, removed


def test_a_page_without_chrome_is_handed_over_unchanged() -> None:
    page = b"<html><body><article><p>Just words &amp; more</p></article></body></html>"
    assert without_chrome(page, None) == (page, None)
    assert without_chrome(page, "windows-1252") == (page, "windows-1252")


def test_a_page_losing_chrome_is_re_encoded_as_utf8_with_its_characters() -> None:
    page = "<html><head><meta charset='iso-8859-1'></head><body><nav>Menu</nav><p>Un café crème</p></body></html>"
    data, charset = without_chrome(page.encode("latin-1"), None)
    assert charset == "utf-8" and "Un café crème".encode() in data and b"Menu" not in data
    document = convert_document(RawDocument(page.encode("latin-1"), mime="text/html; charset=iso-8859-1"))
    assert document.markdown == "Un café crème"


@pytest.mark.parametrize("tag", ["div", "header", "ul", "a href='#x'", "section"])
def test_deep_nesting_costs_linear_time(tag: str) -> None:
    # Any per-element look at ancestors or whole subtrees would make this quadratic: minutes, not a second.
    name, depth = tag.split()[0], 10_000
    page = f"<html><body><main>{f'<{tag}>' * depth}deep words{f'</{name}>' * depth}<nav>menu</nav></main>"
    started = time.monotonic()
    data, _ = without_chrome(page.encode(), None)
    assert time.monotonic() - started < 10
    assert b"deep words" in data and b"menu" not in data


@pytest.fixture(scope="module")
def pool() -> Iterator[ConverterPool]:
    with ConverterPool(1, ConvertLimits(timeout_s=30)) as converter_pool:
        yield converter_pool


async def test_the_origin_reaches_a_converter_process(pool: ConverterPool) -> None:
    raw = RawDocument(WIKIPEDIA_PAGE, origin="https://en.wikipedia.org/wiki/Grey_heron")
    document = await pool.aconvert(raw)
    assert document.markdown.startswith("# Grey heron\n\nThe **grey heron**")
    assert "move to sidebar" not in document.markdown
