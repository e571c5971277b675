"""Credentials in URLs and DSNs: `https://user:pass@host`, `postgres://u:p@h/db`, `redis://:pw@host`.

The URL stays, so memory still records where something lived; only the password in its userinfo becomes
`[REDACTED]`. A userinfo password is a credential by construction, so any value but a template placeholder
(`{{password}}`, `<password>`, `$PASSWORD`, `****`) is replaced, however weak or short it is, unless the
whole URL is a template's example (it opens right after `{{`).
"""

from __future__ import annotations

import re

from pipeline.scrub.values import is_template

Span = tuple[int, int]

# `://`, the user (possibly empty), then the password up to the `@` that ends the userinfo. The user holds
# no `:` or `@`; the password may hold `@`-free percent-escapes and `{}` placeholders. The scheme is not
# required: an earlier stage may have redacted it ("Bearer postgres://..." loses "postgres").
_USERINFO = re.compile(r"://[^\s:/?#@\"'<>\[\]]*:([^\s/?#@\"'<>]+)@")


def _in_template(text: str, scheme_end: int) -> bool:
    """Whether the URL whose `://` is at `scheme_end` opens right after `{{`."""
    start = scheme_end
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "+.-"):
        start -= 1
    return text.endswith("{{", 0, start)


def find_url_credentials(text: str) -> list[Span]:
    """The spans of the passwords in URLs' userinfo."""
    if "@" not in text or "://" not in text:  # most texts hold a link, few an `@`, found by memchr
        return []
    return [
        m.span(1)
        for m in _USERINFO.finditer(text)
        # A URL inside `{{...}}` is a template's example value (`{{postgres://user:pass@host/db}}`).
        if not is_template(m.group(1)) and not _in_template(text, m.start())
    ]
