"""The keyword rule: the value after a secret's name is replaced, the name and the separator kept.

A name is secret-like when its last part is one (split at `_`, `-`, `.` and camel case): `password`,
`passwd`, `passphrase`, `pwd`, `pass`, `secret`, `token`, `auth`, `apikey`; a `key` after a qualifier
(`api_key`, `client-secret`, `AWS_SECRET_ACCESS_KEY`, `privateKey`, `AccountKey`); or a compound ending in
one (`dbpassword`, `authtoken`). So `password_hint`, `token_type`, `max_tokens` and `secrets` are not, and
neither are the pagination tokens (`next_token`, `--starting-token`). Code, `.env`, YAML, JSON, TOML, XML,
HTTP headers, query strings and command-line flags all spell an assignment one of a few ways, which the
separator below reads; prose spells it with a space.

The value must look like a secret (see `values`), and the rule never crosses a line break: a name at the
end of a line ("access token:") takes nothing from the next. Occurrences are found with `str.find` on the
fold for a few needles, and only each occurrence's surroundings are examined, so text without a needle
costs one substring search per needle.
"""

from __future__ import annotations

import re
from enum import Enum
from functools import lru_cache

from pipeline.scrub.needles import FoldedText
from pipeline.scrub.values import assigned_secret, quoted_phrase_secret, random_looking

Span = tuple[int, int]

# Every secret-like name holds one of these (folded); `sig` only counts as a query parameter.
NEEDLES = ("pass", "pwd", "secret", "token", "key", "auth", "sig=", "signature=", "verifier")

_IDENTIFIER = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")
_IDENTIFIER_RUN = re.compile(r"[A-Za-z0-9_.-]*")
# A needle's length as the name holds it: `sig=` ends at the `=`, which is the separator.
_NEEDLE_LENGTHS = tuple((needle, len(needle.rstrip("="))) for needle in NEEDLES)
_NEEDLES_BY_GATE = {
    (equals, k): tuple((n, length) for n, length in _NEEDLE_LENGTHS if (equals or "=" not in n) and (k or "k" not in n))
    for equals in (False, True)
    for k in (False, True)
}
_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_PASSWORD_NAMES = frozenset({"password", "passwd", "passphrase", "pwd", "pass", "passcode"})
_SECRET_NAMES = frozenset({"secret", "token", "auth", "apikey", "authorization"})
_COMPOUND_ENDINGS = ("password", "passwd", "passphrase", "secret", "token", "apikey", "secretkey", "accesskey")
_KEY_QUALIFIERS = frozenset(
    {"api", "access", "secret", "private", "app", "auth", "account", "master", "encryption", "signing"}
    | {"client", "consumer", "license", "service", "subscription", "session", "shared", "webhook", "deploy"}
    | {"admin", "root", "ssh", "storage", "host", "function", "primary", "secondary", "write", "sas", "x"}
)
# Tokens that page through results or count model tokens: not credentials.
_NOT_CREDENTIAL_TOKENS = frozenset(
    {"next", "page", "starting", "continuation", "idempotency", "pagination", "cursor", "sync", "max", "min"}
    | {"num", "total", "count", "input", "output", "prompt", "completion", "reasoning", "cache", "stop"}
)
_EXACT_NAMES = frozenset({"codeverifier", "authorizationcode"})
_QUERY_NAMES = frozenset({"sig", "signature", "xamzsignature", "xgoogsignature"})
_AUTH_SCHEMES = frozenset({"basic", "token", "digest", "apikey", "key", "sso-key", "negotiate"})

_BLANKS = re.compile(r"[ \t]*")
_OPERATORS = (":=", "=>", "=", ":")
# A type annotation before the value: `str`, `Optional[str]`, `str | None`.
_TYPE = r"[A-Za-z_][\w.]*(?:\[[^\]\n]*\])?"
_ANNOTATION = re.compile(rf"{_TYPE}(?:[ \t]*\|[ \t]*{_TYPE})*[ \t]*=(?!=)[ \t]*")
# What may follow a name that a value follows: a blank, an operator, a closing quote or tag.
_FOLLOWERS = frozenset(" \t=:\"'`>")
# A blank and a lower-case word that ends in a blank, punctuation or the end: prose, unless the name is a
# flag or the word is a connective ("is").
_PROSE_WORD = re.compile(r"[ \t]+(?!is\b|was\b|are\b)[a-z]{1,30}(?=[ \t\n,.;:!?)]|\Z)(?![ \t]*(?:=|:[ \t]))")
_CONNECTIVE = re.compile(r"(?:is|was|are)[ \t]+(?::[ \t]*)?")
_BARE = re.compile(r"""[^\s"'`,;&<>)\]}]+""")
_SENTENCE_END = ".:"
_QUOTES = "\"'`"
_MAX_QUOTED = 512


class _Name(Enum):
    PASSWORD = "password"
    SECRET = "secret"
    AUTHORIZATION = "authorization"


def _parts(name: str) -> list[str]:
    return [p.lower() for p in _PARTS.findall(name)]


@lru_cache(maxsize=4096)  # documents repeat a few names ("password", "api_key") many times over
def classify_name(name: str, before: str) -> _Name | None:
    """What kind of secret a name stands for, or None. `before` is the character before the name."""
    parts = _parts(name)
    if not parts:
        return None
    last, previous = parts[-1], parts[-2] if len(parts) > 1 else ""
    joined = "".join(parts)
    if last in _PASSWORD_NAMES or last.endswith(("password", "passwd", "passphrase")):
        return _Name.PASSWORD
    if last == "authorization":
        return _Name.AUTHORIZATION
    if last == "token" and previous in _NOT_CREDENTIAL_TOKENS:
        return None
    if last in _SECRET_NAMES or last.endswith(_COMPOUND_ENDINGS) or joined in _EXACT_NAMES:
        return _Name.SECRET
    if last == "key" and previous in _KEY_QUALIFIERS:
        return _Name.SECRET
    if joined in _QUERY_NAMES and before in "?&":
        return _Name.SECRET
    return None


def _name_start(text: str, start: int) -> int:
    while start > 0 and text[start - 1] in _IDENTIFIER:
        start -= 1
    return start


def _operator_at(text: str, at: int) -> str | None:
    for op in _OPERATORS:
        if text.startswith(op, at):
            # `==` compares, `::` scopes: neither assigns.
            following = text[at + len(op) : at + len(op) + 1]
            return None if following == op[-1] and op in ("=", ":") else op
    return None


class _Value:
    """Where a value starts after a name, and how it was introduced."""

    def __init__(self, at: int, explicit: bool) -> None:
        self.at = at
        self.explicit = explicit


def _introduce(text: str, name_start: int, name_end: int) -> _Value | None:
    """Read the separator after a name; None when what follows is not a value (a line break, nothing)."""
    j = name_end
    opening = text[name_start - 1 : name_start] if name_start else ""
    if opening in "\"'" and opening and text.startswith(opening, j):
        j += 1  # a quoted name: `"password": ...`
    if opening == "<" and text.startswith(">", j):
        return _Value(j + 1, explicit=True)  # `<password>value</password>`
    quoted_name = bool(opening) and opening in "\"'"
    j = _BLANKS.match(text, j).end()  # type: ignore[union-attr]
    op = _operator_at(text, j)
    if op is not None:
        after = j + len(op)
        j = _BLANKS.match(text, after).end()  # type: ignore[union-attr]
        # `force:auth:web:login`, `user:password:uid`: a colon that no blank follows separates names; a
        # quoted name or value (`"auth":"..."`) still assigns.
        if op == ":" and j == after and not quoted_name and text[j : j + 1] not in _QUOTES:
            return None
        if op == ":" and (annotation := _ANNOTATION.match(text, j)) is not None:
            j = annotation.end()  # `password: str = "..."`
        return _Value(j, explicit=True)
    if j == name_end:
        return None  # the name runs into something else
    if text.startswith("- ", j) and text[j - 1] == " ":
        return _Value(_BLANKS.match(text, j + 1).end(), explicit=True)  # type: ignore[union-attr]
    flag = text[name_start : name_start + 1] == "-"
    if not flag and (connective := _CONNECTIVE.match(text, j)) is not None:
        j = connective.end()  # "the password is ..."
    return _Value(j, explicit=flag)


def _skip_scheme(text: str, at: int) -> int:
    """After `Authorization:`, the scheme word (`Basic`, `token`) is kept and the credential follows it."""
    match = _BARE.match(text, at)
    if match is None or match.group().lower() not in _AUTH_SCHEMES:
        return at
    return _BLANKS.match(text, match.end()).end()  # type: ignore[union-attr]


def _quoted(text: str, at: int) -> Span | None:
    quote = text[at]
    close = text.find(quote, at + 1, at + 1 + _MAX_QUOTED)
    if close < 0 or "\n" in text[at + 1 : close]:
        return None
    return at + 1, close


def _bare(text: str, at: int) -> Span | None:
    match = _BARE.match(text, at)
    if match is None:
        return None
    end = match.end()
    # A full stop or colon that ends a sentence ("the password is X.") is not the value's; one before a
    # closing tag, quote or separator is.
    if end == len(text) or text[end].isspace():
        while end > at and text[end - 1] in _SENTENCE_END:
            end -= 1
    return (at, end) if end > at else None


def value_span(text: str, name_start: int, name_end: int, kind: _Name) -> Span | None:
    """The span of the secret value after the name at `[name_start, name_end)`, or None."""
    value = _introduce(text, name_start, name_end)
    if value is None or value.at >= len(text):
        return None
    at = _skip_scheme(text, value.at) if kind is _Name.AUTHORIZATION and value.explicit else value.at
    if at < len(text) and text[at] in _QUOTES:
        span = _quoted(text, at)
        if span is not None:
            content = text[span[0] : span[1]]
            if not value.explicit:
                # "pass `--connect URI` to": quotes in prose mark code, not a value.
                return span if random_looking(content) else None
            if any(c.isspace() for c in content):
                return span if quoted_phrase_secret(content) else None
            return span if assigned_secret(content, password=kind is _Name.PASSWORD, quoted=True) else None
        at += 1  # an unclosed quote: read what follows it bare
    span = _bare(text, at)
    if span is None:
        return None
    content = text[span[0] : span[1]]
    if value.explicit:
        return span if assigned_secret(content, password=kind is _Name.PASSWORD) else None
    return span if random_looking(content) else None


def find_assignments(probe: FoldedText) -> list[Span]:
    """The spans of the secret values after secret-like names in the text."""
    text, find, run = probe.text, probe.folded.find, _IDENTIFIER_RUN.match
    spans: list[Span] = []
    seen: set[int] = set()
    # One text in ten holds an `=` and two in three a `k`, which memchr finds at once: without them the
    # query names, or `token` and `key`, cannot occur.
    needles = _NEEDLES_BY_GATE["=" in text, "k" in probe.folded]
    for needle, length in needles:
        at = find(needle)
        while at >= 0:
            end = run(text, at + length).end()  # type: ignore[union-attr]
            at = find(needle, end)
            if end in seen:
                continue
            seen.add(end)
            span = _assignment_at(text, end)
            if span is not None:
                spans.append(span)
    return spans


def _assignment_at(text: str, end: int) -> Span | None:
    """The value assigned to the identifier that ends at `end`, when it is a secret-like name."""
    # Most occurrences are prose ("keys,", "passwords", "the password for"): rule them out before finding
    # where the name starts.
    following = text[end : end + 1]
    if following not in _FOLLOWERS:
        return None
    start = _name_start(text, end)
    if following in " \t" and text[start] != "-" and _PROSE_WORD.match(text, end) is not None:
        return None
    kind = classify_name(text[start:end].strip("-."), text[start - 1 : start])
    return None if kind is None else value_span(text, start, end, kind)
