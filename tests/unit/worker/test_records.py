"""The runtime's records refuse fields they do not know, so a misspelling fails where it is written."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from worker.records import BatchReport, Change, DeadLetter, ManifestEntry, SyncOutcome, SyncReport


@pytest.mark.parametrize(
    ("record", "fields"),
    [
        (BatchReport, {"source_id": "s", "stroed": 3}),
        (SyncReport, {"source_id": "s", "listd": 1}),
        (ManifestEntry, {"version": "1:2", "items": ["a"]}),
        (Change, {"unit_id": "a", "action": "upsert", "verison": "2"}),
        (DeadLetter, {"source_id": "s", "unit_id": "a", "stage": "read", "error": "E", "message": "m", "tries": 2}),
        (SyncOutcome, {"source_id": "s", "status": "synced", "reprot": None}),
    ],
)
def test_a_misspelled_field_is_refused(record: type, fields: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        record.model_validate(fields)


def test_a_batch_report_is_made_of_exactly_its_tally() -> None:
    report = BatchReport(source_id="s", units=2, stored=3, replayed=1, forgotten=1, failed=1, unchanged=0)
    assert BatchReport.model_validate_json(report.model_dump_json()) == report
