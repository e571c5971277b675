"""The 19 PII classes of stage 4, in priority order (safety.md §6.4), each with its gate and checksum.

Besides the spec's gate on text-wide facts (§6.3), which decides whether a class runs and so changes
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

from pipeline.scrub import _checksums as checksums
from pipeline.scrub._cards import card_passes
from pipeline.scrub._report import Policy
from pipeline.scrub._view import TextFacts

CandidateCheck = Callable[[str, int, int, Policy], bool]
"""Whether the candidate `view[start:end]` passes its class's gate under the policy."""
Gate = Callable[[TextFacts], bool]

LOOKBACK = 80
"""More than the longest match of any class (an IBAN, 64 characters): no match starts further than this
before the first match of its class's hint."""


def _on_text(check: Callable[[str], bool]) -> CandidateCheck:
    return lambda view, start, end, _policy: check(view[start:end])


def _format_only(_view: str, _start: int, _end: int, _policy: Policy) -> bool:
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
    bare_numeric: bool  # left out of `has_likely_pii` (safety.md §6.9)


def _cls(
    name: str,
    pattern: str,
    gate: Gate,
    hint_tail: str,
    check: CandidateCheck,
    token: str,
    *,
    group: int = 0,
    bare: bool = False,
) -> PiiClass:
    hint = re.compile("[0-9]" + hint_tail)
    token = f"[REDACTED_PII_{token}]"
    return PiiClass(name, re.compile(pattern), gate, hint, hint_tail, check, token, group, bare)


PII_CLASSES: tuple[PiiClass, ...] = (
    _cls(
        "cpf_formatted",
        r"\b[0-9]{3}\.[0-9]{3}\.[0-9]{3}-[0-9]{2}\b",
        lambda f: f.has_digit and f.has(".") and f.has("-"),
        r"[0-9]{2}\.[0-9]{3}\.[0-9]{3}-[0-9]{2}",
        _on_text(checksums.cpf_valid),
        "CPF",
    ),
    _cls(
        "cnpj_formatted",
        r"\b[0-9]{2}\.[0-9]{3}\.[0-9]{3}/[0-9]{4}-[0-9]{2}\b",
        lambda f: f.has_digit and f.has(".") and f.has("/") and f.has("-"),
        r"[0-9]\.[0-9]{3}\.[0-9]{3}/[0-9]{4}-[0-9]{2}",
        _on_text(checksums.cnpj_valid),
        "CNPJ",
    ),
    _cls(
        "cuit",
        r"\b[0-9]{2}-[0-9]{8}-[0-9]\b",
        lambda f: f.has_digit and f.has("-"),
        r"[0-9]-[0-9]{8}-[0-9]",
        _on_text(checksums.cuit_valid),
        "CUIT",
    ),
    _cls(
        "iban",
        r"\b[A-Z]{2}[0-9]{2}(?:\s?[A-Z0-9]){11,30}\b",
        lambda f: f.has_upper() and f.has_digit,
        r"(?<=[A-Z]{2}[0-9])[0-9](?:\s?[A-Z0-9]){11}",
        _on_text(checksums.iban_valid),
        "IBAN",
    ),
    _cls(
        "credit_card",
        r"\b(?:[0-9][\s\-]?){13,19}\b",
        lambda f: f.digits >= 13,
        r"[\s\-]?(?:[0-9][\s\-]?){12}",
        card_passes,
        "CREDIT_CARD",
        bare=True,
    ),
    _cls(
        "cnpj_bare",
        r"\b[0-9]{14}\b",
        lambda f: f.run >= 14,
        r"[0-9]{13}",
        _on_text(checksums.cnpj_valid),
        "CNPJ",
        bare=True,
    ),
    _cls(
        "cpf_bare",
        r"\b[0-9]{11}\b",
        lambda f: f.run >= 11,
        r"[0-9]{10}",
        _on_text(checksums.cpf_valid),
        "CPF",
        bare=True,
    ),
    _cls(
        "aadhaar_grouped",
        r"\b[0-9]{4}[\s\-][0-9]{4}[\s\-][0-9]{4}\b",
        lambda f: f.digits >= 12 and (f.has_space() or f.has("-")),
        r"[0-9]{3}[\s\-][0-9]{4}[\s\-][0-9]{4}",
        _on_text(checksums.verhoeff_valid),
        "AADHAAR",
    ),
    _cls(
        "aadhaar_keyword",
        r"(?i)(?:aadhaar|aadhar|आधार|uidai|uid)[\s:#\-no.]{0,10}([0-9]{12})\b",
        lambda f: f.aadhaar_keyword(),
        r"[0-9]{11}",
        _on_text(checksums.verhoeff_valid),
        "AADHAAR",
        group=1,
    ),
    _cls(
        "dni",
        r"(?i)\b[0-9]{8}[A-Z]\b",
        lambda f: f.run >= 8 and f.has_letter(),
        r"(?i:[0-9]{7}[A-Z])",
        _on_text(checksums.dni_valid),
        "DNI",
    ),
    _cls(
        "nie",
        r"(?i)\b[XYZ][0-9]{7}[A-Z]\b",
        lambda f: f.has_nie_letter() and f.run >= 7 and f.has_letter(),
        r"(?i:[0-9]{6}[A-Z])",
        _on_text(checksums.nie_valid),
        "DNI",
    ),
    _cls(
        "nino",
        r"(?i)\b[A-Z]{2}[0-9]{6}[A-D]\b",
        lambda f: f.run >= 6 and f.has_letter(),
        r"(?i:[0-9]{5}[A-D])",
        _on_text(checksums.nino_valid),
        "NINO",
    ),
    _cls(
        "ssn",
        r"\b[0-9]{3}-[0-9]{2}-[0-9]{4}\b",
        lambda f: f.has_digit and f.has("-"),
        r"[0-9]{2}-[0-9]{2}-[0-9]{4}",
        _on_text(checksums.ssn_valid),
        "SSN",
    ),
    _cls(
        "rrn",
        r"\b[0-9]{6}-[1-4][0-9]{6}\b",
        lambda f: f.run >= 6 and f.has("-"),
        r"[0-9]{5}-[1-4][0-9]{6}",
        _format_only,
        "RRN",
    ),
    _cls(
        "rfc",
        r"(?i)\b[A-ZÑ&]{3,4}[0-9]{6}[A-Z0-9]{3}\b",
        lambda f: f.run >= 6,
        r"(?i:[0-9]{5}[A-Z0-9]{3})",
        _format_only,
        "RFC",
    ),
    _cls(
        "pan_in",
        r"(?i)\b[A-Z]{5}[0-9]{4}[A-Z]\b",
        lambda f: f.run >= 4 and f.has_letter(),
        r"(?i:[0-9]{3}[A-Z])",
        _format_only,
        "PAN_IN",
    ),
    _cls(
        "phone_e164",
        r"\+[0-9]{7,15}\b",
        lambda f: f.has("+") and f.run >= 7,
        r"(?<=\+[0-9])[0-9]{6}",
        _format_only,
        "PHONE",
        bare=True,
    ),
    _cls(
        "phone_nanp",
        r"\b(?:\+?1[\s.\-]?)?\(?([2-9][0-9]{2})\)?[\s.\-]?([2-9][0-9]{2})[\s.\-]?([0-9]{4})\b",
        lambda f: f.nanp_separator() or f.run >= 11,
        r"(?<=[2-9])[0-9]{2}\)?[\s.\-]?[2-9][0-9]{2}[\s.\-]?[0-9]{4}",
        _format_only,
        "PHONE",
        bare=True,
    ),
    _cls(
        "my_number",
        r"(?:マイナンバー|個人番号|My\s?Number)[\s:はがを、.\-]{0,12}([0-9]{12})\b",
        lambda f: f.my_number_keyword(),
        r"[0-9]{11}",
        _format_only,
        "MYNUMBER",
        group=1,
    ),
)

ANY_HINT = re.compile("[0-9](?:" + "|".join(sorted({c.hint_tail for c in PII_CLASSES})) + ")")
"""Matches wherever some class's hint does: no match, no class can match."""
