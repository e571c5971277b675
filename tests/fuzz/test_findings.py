"""What the fuzzers in this folder found, each kept as the example that once failed.

Every one of these raised an exception outside the contract's tree (which the API answers with a bare 500).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engines.contract import FetchMode, FetchRequest, InvalidRequestError, ListRequest
from engines.cortex.ranked import FETCH_TAG
from engines.cortex.ranked import fetch_offset as cortex_fetch_offset
from engines.cortex.reads import LIST_TAG, ListCursor
from engines.local import LocalEngine
from tests.integration.test_api_fuzz import _openapi
from tests.unit.tinymemory_ingest.api.conftest import Api, api, seed
from tinymemory_ingest.api.errors import ERROR_TABLE

__all__ = ["api"]

# More digits than `int()` converts (4,300), from a cursor a client wrote by hand.
LONG_DIGITS = "1" * 5000
# JSON nested deeper than the decoder's recursion allows, hex-encoded as a CortexDB cursor carries it.
DEEP_JSON = ("[" * 100_000 + "]" * 100_000).encode().hex()


async def test_a_local_cursor_with_thousands_of_digits_is_past_the_end(tmp_path: Path) -> None:
    engine = LocalEngine(tmp_path / "memory.sqlite3")
    try:
        await seed(engine)
        assert (await engine.list(ListRequest(limit=5))).items
        listed = await engine.list(ListRequest(limit=5, cursor=f"s{LONG_DIGITS}"))
        assert listed.items == [] and listed.next_cursor is None
        fetched = await engine.fetch(
            FetchRequest(query="zeolites", mode=FetchMode.KEYWORD, limit=5, cursor=f"o{LONG_DIGITS}")
        )
        assert fetched.hits == []
    finally:
        engine.close()


@pytest.mark.parametrize(
    "decode",
    [lambda: ListCursor.decode(LIST_TAG + DEEP_JSON), lambda: cortex_fetch_offset(FETCH_TAG + DEEP_JSON)],
    ids=["list", "fetch"],
)
def test_a_cortex_cursor_nested_too_deep_is_unknown(decode: object) -> None:
    with pytest.raises(InvalidRequestError, match="unknown cursor"):
        decode()  # type: ignore[operator]


# --- The OpenAPI schema once documented neither the error answers nor `context.md`'s media type. -------------


def test_every_operation_documents_every_error_answer_with_its_body() -> None:
    schema = _openapi()
    statuses = {str(mapping.status) for _, mapping in ERROR_TABLE} | {"422"}
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            # `/readyz` answers 503 with the engine's health, documented on the route itself.
            assert statuses <= set(responses), (method, path)
            documented = responses["400"]["content"]["application/json"]["schema"]
            assert documented["required"] == ["error"], (method, path)


async def test_context_md_is_documented_and_answered_as_markdown(api: Api) -> None:
    documented = _openapi()["paths"]["/v1/context.md"]["get"]["responses"]["200"]["content"]
    answer = await api.client.get("/v1/context.md")
    assert answer.status_code == 200 and list(documented) == ["text/markdown"]
    assert answer.headers["content-type"] == "text/markdown; charset=utf-8"


# Found by the workflow fuzzer: a legacy import's workspace path that no folder can have once answered 500.
@pytest.mark.parametrize("path", ["notes\x00", "~tinymemory-nobody/workspace"], ids=["nul", "unknown_user"])
async def test_a_workspace_path_no_folder_can_have_is_an_invalid_request(api: Api, path: str) -> None:
    answer = await api.post("/v1/legacy-imports", {"path": path})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["kind"] == "invalid_request" and "cannot be a folder" in error["message"]
    assert (await api.client.get("/v1/legacy-imports")).json() == []
