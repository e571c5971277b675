"""What the schemathesis run (`tests/integration/test_api_fuzz.py`) found answering a bare 500, each kept here.

Each request once reached an exception outside the contract's tree; now each is a contract error or an answer.
"""

from __future__ import annotations

import pytest

from tests.unit.tinymemory_ingest.api.conftest import Api

# Targets a source kind could not look at: `~user` with no such user (pathlib raises RuntimeError), and a name
# longer than the filesystem allows (OSError ENAMETOOLONG, which `Path.exists` does not swallow).
UNEXAMINABLE_TARGETS = [
    ("~tinymemory-nobody/notes", "no home directory"),
    ("n" * 300, "cannot be examined (File name too long)"),
]

# Far beyond SQLite's 64-bit integers, which the local engine once bound as they came.
HUGE = 10**30


@pytest.mark.parametrize("kind", ["folder", "file"])
@pytest.mark.parametrize(("target", "says"), UNEXAMINABLE_TARGETS)
async def test_a_target_that_cannot_be_examined_is_an_invalid_request(
    api: Api, kind: str, target: str, says: str
) -> None:
    answer = await api.post("/v1/sources", {"kind": kind, "target": target})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["kind"] == "invalid_request" and says in error["message"]
    assert (await api.client.get("/v1/sources")).json() == []


async def test_a_limit_beyond_64_bits_reads_everything(api: Api) -> None:
    listed = await api.post("/v1/list", {"limit": HUGE})
    assert listed.status_code == 200 and len(listed.json()["items"]) == 4
    for mode in ("keyword", "vector", "hybrid"):
        fetched = await api.post("/v1/fetch", {"query": "zeolites", "mode": mode, "limit": HUGE})
        assert fetched.status_code == 200 and fetched.json()["hits"], mode
    recalled = await api.post("/v1/recall", {"question": "who likes zeolites", "limit": HUGE})
    assert recalled.status_code == 200 and recalled.json()["citations"]


async def test_a_cursor_beyond_64_bits_is_past_the_end(api: Api) -> None:
    listed = await api.post("/v1/list", {"limit": 5, "cursor": f"s{HUGE}"})
    assert listed.status_code == 200 and listed.json()["items"] == []
    fetched = await api.post("/v1/fetch", {"query": "zeolites", "mode": "keyword", "limit": 5, "cursor": f"o{HUGE}"})
    assert fetched.status_code == 200 and fetched.json()["hits"] == []


@pytest.mark.parametrize("moment", ["0001-01-01T00:00:00+00:01", "9999-12-31T23:59:59-00:01"])
async def test_an_instant_outside_the_years_utc_holds_is_not_the_contracts_shape(api: Api, moment: str) -> None:
    answer = await api.post("/v1/list", {"filter": {"observed_before": moment}, "limit": 5})
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["kind"] == "invalid_request"
    assert error["message"] == f"`filter.observed_before`: {moment} is outside the years 1 to 9999 in UTC"
