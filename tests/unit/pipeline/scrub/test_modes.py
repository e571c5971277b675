"""The two rule sets side by side: where the extended default departs from safety.md's vectors, and why.

Every docs/spec/safety.md §11 vector holds under `Policy.spec_compatible()` (test_scrub_vectors). Under the default,
each either holds too or is listed here with what the extended rules make of it; a change to either rule set that moves
a vector shows up as a failure of this table.
"""

from __future__ import annotations

import pytest

from engines.contract import Document
from pipeline.scrub import Policy, RuleSet, sanitize_json, sanitize_text, scrub_item
from tests.unit.pipeline.scrub.test_vectors import JSON_VECTORS, TEXT_VECTORS, TextVector

# Vector number -> (what the extended rules return, why).
DIFFERENCES: dict[int, tuple[str, str]] = {
    8: ("bearer shortword here", "lower-case 'bearer' and a word: prose, no shape 1"),
    11: ("Bearer [REDACTED] , wxyz5678", "fragments continue one space apart on one line; nothing is dropped"),
    18: ("password: [REDACTED]", "the keyword rule keeps the name and separator"),
    19: ("the secret is out", "a word after 'secret' in a sentence is not a value"),
    20: ("token=abc&x=1", "a value needs 8 characters"),
    25: ("access_token=[REDACTED]", "the keyword rule keeps the name"),
    43: ("card [REDACTED_PII_CREDIT_CARD] now", "a card ends on a digit; the space stays"),
    56: ("RRN 900101-1234567", "stdnum's check digit fails: an RRN-shaped number that is no RRN"),
    62: ("call [REDACTED_PII_PHONE]", "the area code's parenthesis goes with the phone"),
    64: ("call [REDACTED_PII_PHONE]", "a phone word stands before the bare number"),
    66: ("phone [REDACTED_PII_PHONE]", "spaced international numbers are phones"),
}


@pytest.mark.parametrize("vector", TEXT_VECTORS, ids=str)
def test_the_default_keeps_each_vector_or_lists_the_difference(vector: TextVector) -> None:
    extended = sanitize_text(vector.text).value
    assert extended == DIFFERENCES.get(vector.number, (vector.expected, ""))[0]
    assert sanitize_text(vector.text, Policy.spec_compatible()).value == vector.expected


def test_the_json_walk_is_the_same_under_both() -> None:
    for value, expected, _counters in JSON_VECTORS:
        assert sanitize_json(value).value == expected


def test_spec_compatible_is_a_policy_like_any_other() -> None:
    spec = Policy.spec_compatible()
    assert spec.rules is RuleSet.SPEC and spec != Policy()
    item = Document.from_text("password: hunter2")
    spec_item, default_item = scrub_item(item, spec).value, scrub_item(item).value
    assert isinstance(spec_item, Document) and isinstance(default_item, Document)
    assert (spec_item.body.text, default_item.body.text) == ("[REDACTED]", "password: [REDACTED]")
