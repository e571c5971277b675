"""What a scrub returns: the policy it ran under, the scrubbed value and the counters of what it replaced."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

T = TypeVar("T")


class RuleSet(Enum):
    """Which rules scrub: today's, or exactly safety.md's (for ids byte-identical with the Rust implementation)."""

    EXTENDED = "extended"
    """safety.md's rules, corrected and widened (see the package docstring): the default."""

    SPEC = "spec"
    """safety.md's rules exactly, misses and false positives included."""


class BareCardGate(Enum):
    """How much evidence a bare run of 13-19 digits needs before it is redacted as a card number."""

    LUHN_ONLY = "luhn_only"
    """Every Luhn-valid bare run is a card: the strictest setting, and the default."""

    CORROBORATED = "corroborated"
    """A bare run also needs a known issuer prefix at an issued length, or a card keyword nearby."""


SPEC_RULES = RuleSet.SPEC
"""`RuleSet.SPEC` once: reading a member through its enum class is a slow lookup, and scrubs ask per text."""


@dataclass(frozen=True)
class Policy:
    """Which rules run and how aggressive the PII stage is; the default redacts most of what it claims.

    `redact_emails` applies under both rule sets: safety.md detects addresses and never redacts them, which
    stays the default. `regions` (ISO 3166 codes known to `phonenumbers`, such as `("PH", "TR")`) are where
    the texts come from: a phone number written in one of their national formats, with or without its
    trunk prefix, is validated under them too (EXTENDED only; safety.md's phones are shapes).
    """

    bare_card: BareCardGate = BareCardGate.LUHN_ONLY
    rules: RuleSet = RuleSet.EXTENDED
    redact_emails: bool = False
    regions: tuple[str, ...] = ()

    @staticmethod
    def corroborated() -> Policy:
        """The policy for machine payloads, where 13-digit millisecond timestamps pass Luhn 1 time in 10.

        Bare digit runs of the other checksum classes (Aadhaar, undashed Korean RRN) then need a keyword too.
        """
        return Policy(bare_card=BareCardGate.CORROBORATED)

    @staticmethod
    def spec_compatible() -> Policy:
        """safety.md's behaviour exactly, so that item ids match the Rust implementation's byte for byte."""
        return Policy(rules=RuleSet.SPEC)

    @property
    def is_spec(self) -> bool:
        return self.rules is SPEC_RULES


DEFAULT_POLICY = Policy()


@dataclass
class SanitizationReport:
    """How many things a scrub replaced, by kind. It never holds an original value."""

    blocked_secret_hits: int = 0
    text_redactions: int = 0
    key_redactions: int = 0
    depth_redactions: int = 0
    pii_redactions: int = 0

    def changed(self) -> bool:
        """True when anything was replaced."""
        # Spelled out rather than looped over `fields()`: this runs once per scrubbed text.
        return (
            self.blocked_secret_hits > 0
            or self.text_redactions > 0
            or self.key_redactions > 0
            or self.depth_redactions > 0
            or self.pii_redactions > 0
        )

    def merge(self, other: SanitizationReport) -> SanitizationReport:
        """A new report holding the field-wise sum of both; neither operand is modified."""
        return SanitizationReport(
            blocked_secret_hits=self.blocked_secret_hits + other.blocked_secret_hits,
            text_redactions=self.text_redactions + other.text_redactions,
            key_redactions=self.key_redactions + other.key_redactions,
            depth_redactions=self.depth_redactions + other.depth_redactions,
            pii_redactions=self.pii_redactions + other.pii_redactions,
        )


@dataclass
class Sanitized(Generic[T]):
    """A scrubbed value and the report of what scrubbing it replaced."""

    value: T
    report: SanitizationReport
