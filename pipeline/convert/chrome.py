"""A page's navigation chrome, removed before its HTML is converted, so that only what the page says is stored.

Menus, sidebars, language pickers and login prompts repeat on every page of a site: stored, they would bury
each page's own words under the site's, and match every search for "log in". The rules are few, fixed and
about structure, never about a site's wording:

1. Site navigation and controls wherever they stand: `<nav>`, `role="navigation"`, `<button>` (the "move to
   sidebar" and "hide" toggles), `<select>` and `<template>`.
2. The page's own header and footer: `<header>`, `<footer>`, `role="banner"` and `role="contentinfo"` outside
   any `<article>`, `<section>` or `<main>`, whose headers and footers belong to the content they open or
   close (search engines mark each result's caption `contentinfo`).
3. What assistive technology is told to skip: `aria-hidden="true"`, and skip links (an in-page link whose
   text begins "Skip to" or "Jump to", or MediaWiki's `mw-jump-link`).
4. Language lists: MediaWiki's (`#p-lang`, `#p-lang-btn`, `.interlanguage-link`, `.mw-portlet-lang`), and any
   list of three or more links where every link names its language (`hreflang`).
5. Login prompts: MediaWiki's personal links (`#pt-login`, `#pt-createaccount` and their copies) and any form
   whose action signs a person in or up.

`<script>` and `<style>` are markitdown's to drop. A page with no chrome is handed over byte for byte.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from bs4 import BeautifulSoup, Tag

_CHROME_TAGS: Final = ("nav", "button", "select", "template")
_PAGE_PARTS: Final = ("header", "footer")
_PAGE_ROLES: Final = frozenset({"banner", "contentinfo"})
_CONTENT_SCOPES: Final = ("article", "section", "main")
_SKIP_TEXT: Final = re.compile(r"\s*(?:skip|jump)\s+to\b", re.IGNORECASE)
_SKIP_CLASSES: Final = frozenset({"mw-jump-link", "skip-link"})
_LANGUAGE_IDS: Final = frozenset({"p-lang", "p-lang-btn"})
_LANGUAGE_CLASSES: Final = frozenset({"interlanguage-link", "mw-portlet-lang"})
_LANGUAGE_LIST_MIN_LINKS: Final = 3
_LOGIN_IDS: Final = re.compile(r"pt-(?:login|createaccount|anonuserpage)(?:-\d+)?")
_LOGIN_ACTIONS: Final = re.compile(r"log-?in|sign-?in|sign-?up|createaccount", re.IGNORECASE)


def without_chrome(data: bytes, charset: str | None) -> tuple[bytes, str | None]:
    """`data` with the module's chrome removed, re-encoded as UTF-8, and the charset to read it with.

    Decoded as markitdown decodes HTML: with `charset`, else as UTF-8 first. When nothing matched, `data` and
    `charset` come back unchanged, so a page without chrome converts exactly as before.
    """
    # Imported here, as markitdown is: a process that never converts HTML never pays for BeautifulSoup.
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(data, "html.parser", from_encoding=charset or "utf-8")
    chrome = _chrome_elements(soup)
    for element in chrome:
        element.decompose()
    return (soup.decode().encode("utf-8"), "utf-8") if chrome else (data, charset)


def _chrome_elements(soup: BeautifulSoup) -> list[Tag]:
    """The outermost chrome elements, found in one walk that never enters what it will remove.

    Every test looks at an element, its attributes and its direct children only, and whether it stands in a
    content scope travels down the walk: a page nested thousands deep costs time in proportion to its size.
    """
    from bs4 import Tag

    found: list[Tag] = []
    stack: list[tuple[Tag, bool]] = [(soup, False)]
    while stack:
        parent, in_scope = stack.pop()
        for child in parent.children:
            if not isinstance(child, Tag):
                continue
            if _is_chrome(child, in_scope=in_scope):
                found.append(child)
            else:
                stack.append((child, in_scope or child.name in _CONTENT_SCOPES))
    return found


def _is_chrome(element: Tag, *, in_scope: bool) -> bool:
    """True when `element` is chrome under one of the module's rules; `in_scope`: inside a content scope."""
    name, role = element.name, _attribute(element, "role").lower()
    if name in _CHROME_TAGS or role == "navigation":
        return True
    if (name in _PAGE_PARTS or role in _PAGE_ROLES) and not in_scope:
        return True
    if _attribute(element, "aria-hidden").lower() == "true":
        return True
    classes = set(element.get_attribute_list("class"))
    identifier = _attribute(element, "id")
    if identifier in _LANGUAGE_IDS or classes & _LANGUAGE_CLASSES or _LOGIN_IDS.fullmatch(identifier):
        return True
    if name == "a":
        return bool(classes & _SKIP_CLASSES) or _is_skip_link(element)
    if name in ("ul", "ol"):
        return _is_language_list(element)
    return name == "form" and _LOGIN_ACTIONS.search(_attribute(element, "action")) is not None


def _attribute(element: Tag, name: str) -> str:
    value = element.get(name)
    if isinstance(value, list):
        return " ".join(value)
    return value or ""


def _is_skip_link(link: Tag) -> bool:
    from bs4 import Tag
    from bs4.element import NavigableString

    if not _attribute(link, "href").startswith("#"):
        return False
    # The link's own text and its children's (`<a><span>Skip to content</span></a>`), not a whole subtree's.
    text = "".join(
        str(node)
        for child in link.children
        for node in (child.children if isinstance(child, Tag) else (child,))
        if isinstance(node, NavigableString)
    )
    return _SKIP_TEXT.match(text) is not None


def _is_language_list(listing: Tag) -> bool:
    """Three or more items, each a link that names its language (`<li><a hreflang>`), and nothing else."""
    from bs4 import Tag

    items = [child for child in listing.children if isinstance(child, Tag)]
    links = [next((a for a in item.children if isinstance(a, Tag) and a.name == "a"), None) for item in items]
    return len(links) >= _LANGUAGE_LIST_MIN_LINKS and all(link is not None and link.get("hreflang") for link in links)
