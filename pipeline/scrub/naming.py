"""How the text names a number: an identifier's own words near it, another kind of number's word right
before it, and validators that never raise.

A bare run of 8 to 13 digits passes for an identifier only beside the identifier's name ("NHS", "PESEL",
"TFN"), within a few words on either side: a 1-in-10 or 1-in-11 checksum passes for many ids and
timestamps. A shape of the identifier's own (`752-174-888`, `592 841 3823`) may pass without its name, but
not when the text names the number as something else (an order, invoice, ticket or reference word right
before it, or the name of another identifier written in the same shape), nor when it stands in a list of
numbers (another number right before or after it, one space or comma away).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from types import ModuleType

KEYWORD_BEFORE = 48
KEYWORD_AFTER = 24
_OTHER_WINDOW = 32
_OTHER_NUMBER = re.compile(
    r"(?i)(?<![^\W\d_])(?:order|invoice|inv|ticket|tracking|ref|reference|po|sku|part|model|serial|case|account"
    r"|acct|item|batch|lot|booking|confirmation|receipt|transaction|txn|issue|build|version|isbn|zip|postcode)"
    r"(?:[\s.:#=-]|no|nr|num|number|id)*$"
)
_NOT_DIGIT = re.compile(r"[^0-9]")


def stdnum_valid(module: ModuleType) -> Callable[[str], bool]:
    """The module's `is_valid`, False for anything it raises: a validator's bug must not fail a scrub."""
    validate: Callable[[str], bool] = module.is_valid

    def valid(text: str) -> bool:
        try:
            return bool(validate(text))
        except Exception:  # stdnum catches its own errors; anything else is a bug on odd input
            return False

    return valid


def digits_valid(module: ModuleType) -> Callable[[str], bool]:
    """`stdnum_valid` of the ASCII digits alone: stdnum's own `compact` drops only the separators its
    country uses (a dash for an SSN, a space for a TFN), and people write others."""
    valid = stdnum_valid(module)
    return lambda text: valid(_NOT_DIGIT.sub("", text))


def keyword_pattern(keywords: tuple[str, ...]) -> re.Pattern[str]:
    """The keywords as whole words, any case."""
    words = "|".join(re.escape(k) for k in sorted(keywords, key=len, reverse=True))
    return re.compile(rf"(?i)(?<![^\W\d_])(?:{words})(?![^\W\d_])")


def near(keyword: re.Pattern[str], view: str, start: int, end: int) -> bool:
    """True when a keyword stands within a few words before or after `view[start:end]`."""
    return (
        keyword.search(view, max(0, start - KEYWORD_BEFORE), start) is not None
        or keyword.search(view, end, end + KEYWORD_AFTER) is not None
    )


def named_otherwise(view: str, start: int) -> bool:
    """True when the words right before `view[start]` name another kind of number ("order", "invoice no.",
    "ref #", "tracking:")."""
    return _OTHER_NUMBER.search(view, max(0, start - _OTHER_WINDOW), start) is not None


_LIST_BEFORE = re.compile(r"[0-9][,;]? ?$")
_LIST_AFTER = re.compile(r" ?[,;]? ?[0-9]")


def in_a_list(view: str, start: int, end: int) -> bool:
    """True when another number stands right before or after `view[start:end]` (`200 301 404 500`)."""
    return _LIST_BEFORE.search(view, max(0, start - 3), start) is not None or (
        _LIST_AFTER.match(view, end, end + 4) is not None
    )


def needles(keywords: tuple[str, ...]) -> tuple[bytes, ...]:
    """The keywords as `TextFacts.has_any` needles: lower-case UTF-8."""
    # TextFacts lowers ASCII letters only, so a non-ASCII keyword is given in each case it is written in.
    return tuple(k.encode().lower() for k in keywords)
