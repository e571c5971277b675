"""Email addresses: detected always, redacted only under a policy that asks (`Policy.redact_emails`).

safety.md detects addresses and never redacts them, because an address is often what a memory is about
(who wrote, whom to ask); a host that stores third parties' mail can turn redaction on.
"""

from __future__ import annotations

import re

from pipeline.scrub.classes import PiiClass, format_only, pii_class

EMAIL = re.compile(r"(?i)\b[A-Z0-9._%+-]+@[A-Z0-9.-]+\.[A-Z]{2,}\b")

EMAIL_CLASS: PiiClass = pii_class("email", EMAIL.pattern, lambda f: f.has("@"), "", format_only, "EMAIL")
"""The class whose token replaces a redacted address; its hits come from `find_emails`, not a hint."""


def find_emails(view: str) -> list[tuple[int, int]]:
    """The spans of the addresses in the text."""
    return [m.span() for m in EMAIL.finditer(view)] if "@" in view else []


def has_email(text: str) -> bool:
    """True when the text holds an email address."""
    return "@" in text and EMAIL.search(text) is not None
