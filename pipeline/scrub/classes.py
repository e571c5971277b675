"""The 19 PII classes of stage 4, in priority order (docs/spec/safety.md §6.4), each with its gate and checksum.

Besides the spec's gate on text-wide facts (docs/spec/safety.md §6.3), which decides whether a class runs and so changes
results, each class has a hint: a regex every match of the class contains, starting with a digit. Most
class patterns begin with `\\b` or a case-insensitive word, which give Python's regex engine no first
character to skip ahead to, so each scan would cost a match attempt at every position; a hint starts with
a bare `[0-9]`, which the engine skips ahead to. A hint that finds nothing proves the class cannot match,
and where it first matches bounds where the first match can start. All hints share one leading digit, so
one search over their union rules out every class at once, which is the common case for prose.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from pipeline.scrub import checksums
from pipeline.scrub.cards import card_passes
from pipeline.scrub.report import Policy
from pipeline.scrub.view import TextFacts

CandidateCheck = Callable[[str, int, int, Policy], bool]
"""Whether the candidate `view[start:end]` passes its class's gate under the policy."""
SpanCheck = Callable[[str, int, int, Policy], "tuple[int, int] | None"]
"""The identifier within the candidate `view[start:end]`, or None: for classes whose match may be too long."""
Gate = Callable[[TextFacts], bool]

LOOKBACK = 80
"""More than the longest match of any class (an IBAN, 64 characters): no match starts further than this
before the first match of its class's hint."""


def on_text(check: Callable[[str], bool]) -> CandidateCheck:
    """A check of the candidate's text alone."""
    return lambda view, start, end, _policy: check(view[start:end])


def format_only(_view: str, _start: int, _end: int, _policy: Policy) -> bool:
    """The check of a class whose pattern is the whole test."""
    return True


@dataclass(frozen=True)
class PiiClass:
    """One identifier class: what it matches, when it runs, what a candidate must pass, what replaces it."""

    name: str
    pattern: re.Pattern[str]
    gate: Gate
    hint: re.Pattern[str]
    hint_tail: str  # the hint after its leading digit, for the union of all hints
    check: CandidateCheck
    token: str
    group: int  # the capturing classes replace only the digits, so the keyword stays visible
    bare_numeric: bool  # left out of `has_likely_pii` (docs/spec/safety.md §6.9)
    narrow: SpanCheck | None = None  # when set, decides instead of `check` and may shorten the hit
    late_gate: Gate | None = None  # a costlier part of the gate (a keyword lookup), asked once a hint matched
    shield: CandidateCheck | None = None  # asked of a failing candidate: True keeps its span from other classes


def pii_class(
    name: str,
    pattern: str,
    gate: Gate,
    hint_tail: str,
    check: CandidateCheck,
    token: str,
    *,
    group: int = 0,
    bare: bool = False,
    narrow: SpanCheck | None = None,
    late_gate: Gate | None = None,
    shield: CandidateCheck | None = None,
) -> PiiClass:
    """A class whose hint is `[0-9]` followed by `hint_tail`, and whose token is `[REDACTED_PII_<token>]`.

    `shield`, when given, is asked of each candidate that fails: a candidate it accepts is kept as it is,
    and no other class may redact any part of it (an IBAN that fails mod 97 is not a card, and an SSN with
    a reserved area is not a phone)."""
    hint = re.compile("[0-9]" + hint_tail)
    token_text = f"[REDACTED_PII_{token}]"
    return PiiClass(
        name, re.compile(pattern), gate, hint, hint_tail, check, token_text, group, bare, narrow, late_gate, shield
    )


def _union(classes: tuple[PiiClass, ...]) -> re.Pattern[str]:
    return re.compile("[0-9](?:" + "|".join(sorted({c.hint_tail for c in classes})) + ")")


@dataclass(frozen=True)
class ClassTable:
    """The classes of one rule set, in priority order, and the union of their hints.

    `alone` names classes whose hint matches far more often than the rest (a phone's seven digits are in
    every IP address): the others have a union of their own, so a text that only such a class's hint
    matches runs only that class. `min_run` lets a text without that many digits side by side skip the
    table at once.
    """

    classes: tuple[PiiClass, ...]
    any_hint: re.Pattern[str]
    others_hint: re.Pattern[str]
    alone: frozenset[str]
    min_run: int = 1
    """The longest run of consecutive digits every match of every class holds at least."""

    @staticmethod
    def of(
        classes: tuple[PiiClass, ...],
        alone: frozenset[str] = frozenset(),
        min_run: int = 1,
        union_tails: tuple[str, ...] = (),
    ) -> ClassTable:
        """`union_tails`, when given, make the union instead of every class's tail: each class's hint must
        then imply one of them at the same position (seven digits with light separators are wherever a
        nine-digit run is), which keeps the union exact and makes it shorter and faster to scan."""
        others = tuple(c for c in classes if c.name not in alone)
        never = re.compile("(?!)")
        union = re.compile("[0-9](?:" + "|".join(union_tails) + ")") if union_tails else _union(classes)
        return ClassTable(classes, union, _union(others) if others else never, alone, min_run)


PII_CLASSES: tuple[PiiClass, ...] = (
    pii_class(
        "cpf_formatted",
        r"\b[0-9]{3}\.[0-9]{3}\.[0-9]{3}-[0-9]{2}\b",
        lambda f: f.has_digit and f.has(".") and f.has("-"),
        r"[0-9]{2}\.[0-9]{3}\.[0-9]{3}-[0-9]{2}",
        on_text(checksums.cpf_valid),
        "CPF",
    ),
    pii_class(
        "cnpj_formatted",
        r"\b[0-9]{2}\.[0-9]{3}\.[0-9]{3}/[0-9]{4}-[0-9]{2}\b",
        lambda f: f.has_digit and f.has(".") and f.has("/") and f.has("-"),
        r"[0-9]\.[0-9]{3}\.[0-9]{3}/[0-9]{4}-[0-9]{2}",
        on_text(checksums.cnpj_valid),
        "CNPJ",
    ),
    pii_class(
        "cuit",
        r"\b[0-9]{2}-[0-9]{8}-[0-9]\b",
        lambda f: f.has_digit and f.has("-"),
        r"[0-9]-[0-9]{8}-[0-9]",
        on_text(checksums.cuit_valid),
        "CUIT",
    ),
    pii_class(
        "iban",
        r"\b[A-Z]{2}[0-9]{2}(?:\s?[A-Z0-9]){11,30}\b",
        lambda f: f.has_upper() and f.has_digit,
        r"(?<=[A-Z]{2}[0-9])[0-9](?:\s?[A-Z0-9]){11}",
        on_text(checksums.iban_valid),
        "IBAN",
    ),
    pii_class(
        "credit_card",
        r"\b(?:[0-9][\s\-]?){13,19}\b",
        lambda f: f.digits >= 13,
        r"[\s\-]?(?:[0-9][\s\-]?){12}",
        card_passes,
        "CREDIT_CARD",
        bare=True,
    ),
    pii_class(
        "cnpj_bare",
        r"\b[0-9]{14}\b",
        lambda f: f.run >= 14,
        r"[0-9]{13}",
        on_text(checksums.cnpj_valid),
        "CNPJ",
        bare=True,
    ),
    pii_class(
        "cpf_bare",
        r"\b[0-9]{11}\b",
        lambda f: f.run >= 11,
        r"[0-9]{10}",
        on_text(checksums.cpf_valid),
        "CPF",
        bare=True,
    ),
    pii_class(
        "aadhaar_grouped",
        r"\b[0-9]{4}[\s\-][0-9]{4}[\s\-][0-9]{4}\b",
        lambda f: f.digits >= 12 and (f.has_space() or f.has("-")),
        r"[0-9]{3}[\s\-][0-9]{4}[\s\-][0-9]{4}",
        on_text(checksums.verhoeff_valid),
        "AADHAAR",
    ),
    pii_class(
        "aadhaar_keyword",
        r"(?i)(?:aadhaar|aadhar|आधार|uidai|uid)[\s:#\-no.]{0,10}([0-9]{12})\b",
        lambda f: f.aadhaar_keyword(),
        r"[0-9]{11}",
        on_text(checksums.verhoeff_valid),
        "AADHAAR",
        group=1,
    ),
    pii_class(
        "dni",
        r"(?i)\b[0-9]{8}[A-Z]\b",
        lambda f: f.run >= 8 and f.has_letter(),
        r"(?i:[0-9]{7}[A-Z])",
        on_text(checksums.dni_valid),
        "DNI",
    ),
    pii_class(
        "nie",
        r"(?i)\b[XYZ][0-9]{7}[A-Z]\b",
        lambda f: f.has_nie_letter() and f.run >= 7 and f.has_letter(),
        r"(?i:[0-9]{6}[A-Z])",
        on_text(checksums.nie_valid),
        "DNI",
    ),
    pii_class(
        "nino",
        r"(?i)\b[A-Z]{2}[0-9]{6}[A-D]\b",
        lambda f: f.run >= 6 and f.has_letter(),
        r"(?i:[0-9]{5}[A-D])",
        on_text(checksums.nino_valid),
        "NINO",
    ),
    pii_class(
        "ssn",
        r"\b[0-9]{3}-[0-9]{2}-[0-9]{4}\b",
        lambda f: f.has_digit and f.has("-"),
        r"[0-9]{2}-[0-9]{2}-[0-9]{4}",
        on_text(checksums.ssn_valid),
        "SSN",
    ),
    pii_class(
        "rrn",
        r"\b[0-9]{6}-[1-4][0-9]{6}\b",
        lambda f: f.run >= 6 and f.has("-"),
        r"[0-9]{5}-[1-4][0-9]{6}",
        format_only,
        "RRN",
    ),
    pii_class(
        "rfc",
        r"(?i)\b[A-ZÑ&]{3,4}[0-9]{6}[A-Z0-9]{3}\b",
        lambda f: f.run >= 6,
        r"(?i:[0-9]{5}[A-Z0-9]{3})",
        format_only,
        "RFC",
    ),
    pii_class(
        "pan_in",
        r"(?i)\b[A-Z]{5}[0-9]{4}[A-Z]\b",
        lambda f: f.run >= 4 and f.has_letter(),
        r"(?i:[0-9]{3}[A-Z])",
        format_only,
        "PAN_IN",
    ),
    pii_class(
        "phone_e164",
        r"\+[0-9]{7,15}\b",
        lambda f: f.has("+") and f.run >= 7,
        r"(?<=\+[0-9])[0-9]{6}",
        format_only,
        "PHONE",
        bare=True,
    ),
    pii_class(
        "phone_nanp",
        r"\b(?:\+?1[\s.\-]?)?\(?([2-9][0-9]{2})\)?[\s.\-]?([2-9][0-9]{2})[\s.\-]?([0-9]{4})\b",
        lambda f: f.nanp_separator() or f.run >= 11,
        r"(?<=[2-9])[0-9]{2}\)?[\s.\-]?[2-9][0-9]{2}[\s.\-]?[0-9]{4}",
        format_only,
        "PHONE",
        bare=True,
    ),
    pii_class(
        "my_number",
        r"(?:マイナンバー|個人番号|My\s?Number)[\s:はがを、.\-]{0,12}([0-9]{12})\b",
        lambda f: f.my_number_keyword(),
        r"[0-9]{11}",
        format_only,
        "MYNUMBER",
        group=1,
    ),
)

SPEC_TABLE = ClassTable.of(PII_CLASSES)
ANY_HINT = SPEC_TABLE.any_hint
"""Matches wherever some class's hint does: no match, no class can match."""
