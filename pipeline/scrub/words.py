"""Ordinary words: what the value of a secret is not.

The keyword rule leaves a value alone when it is an ordinary word ("the token for", "password using"), so it
needs to tell `authentication` from `qpgvzxkemt` without a dependency. `words.txt` is a compact list of
about 8,000 lowercase English words: every word of three or more letters used in the comments and
docstrings of at least two modules of CPython 3.11's standard library (so technical English: "keystore",
"registry", "rotate"), built once with the tokenizer and kept as package data. A value is ordinary when it
is one of those words in one case (`word`, `Word`, `WORD`), allowing the common inflections, or a
compound of them joined by `_`, `-`, `.` or camel case (`read-only`, `access_token`, `getToken`). A
compound written as one lowercase word (`plainwordsecret`) is not in the list and so is not ordinary.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_SUFFIXES = ("s", "es", "ed", "d", "ing", "ly", "er", "ers")
_LETTERS = re.compile(r"[A-Za-z]+")
_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
_JOINERS = re.compile(r"[_.\-]+")

# Short words the stdlib's prose lacks or that fall under the three-letter floor of the list.
_EXTRA = frozenset(
    {"a", "an", "as", "at", "be", "by", "do", "go", "if", "in", "is", "it", "me", "my", "no", "of", "ok", "on"}
    | {"or", "so", "to", "up", "us", "we", "id", "ids", "db", "env", "url", "api", "cli", "ui", "io", "os"}
    # The vocabulary of credentials itself, which the stdlib rarely discusses.
    | {"credential", "credentials", "passphrase", "passphrases", "vault", "keyring", "keychain", "keystore"}
    | {"plaintext", "passwordless", "login", "logout", "signin", "signup", "auth", "oauth", "sso", "mfa", "otp"}
)


@cache
def vocabulary() -> frozenset[str]:
    """The word list, read once on first use."""
    text = resources.files("pipeline.scrub").joinpath("words.txt").read_text(encoding="utf-8")
    return frozenset(text.split()) | _EXTRA


def _known(lower: str) -> bool:
    words = vocabulary()
    if lower in words:
        return True
    return any(lower.endswith(s) and lower[: -len(s)] in words for s in _SUFFIXES if len(lower) > len(s) + 2)


def is_word(value: str) -> bool:
    """True for one known word in one case: `token`, `Token`, `TOKEN`, but not `ToKeN`."""
    if not value.isascii() or _LETTERS.fullmatch(value) is None:
        return False
    if not (value.islower() or value.isupper() or value.istitle()):
        return False
    return _known(value.lower())


def is_ordinary(value: str) -> bool:
    """True for a known word or a compound of known words (`read-only`, `user_password`, `getToken`).

    A digit anywhere makes a value not ordinary: `password123` is a password, not prose.
    """
    if is_word(value):
        return True
    if not value.isascii():
        return False
    pieces = [p for p in _JOINERS.split(value) if p]
    parts = [part for piece in pieces for part in _PARTS.findall(piece)]
    if not parts or "".join(parts) != "".join(pieces):
        return False  # something besides letters and joiners
    return all(_known(part.lower()) for part in parts)
