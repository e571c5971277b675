"""Credentials never reach a log line, an answer or a printed setting.

Where each credential goes: the settings hold the engine key, the Redis URL and the GitHub token as
`SecretStr`; the token file holds only SHA-256 digests of the API's bearer tokens; a document's label drops the
`user:password@` of the URL it came from. Every logger is captured at DEBUG while the API is called with good,
bad and revoked tokens, and while documents fetched from a credentialed URL fail to convert.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from engines.contract import Error
from pipeline.convert import RawDocument, convert_document
from tests.unit.tinymemory_ingest.api.conftest import open_api
from worker.settings import Settings

ENGINE_KEY = "ek-3f9a7c1d5b2e8f40"
REDIS_PASSWORD = "rp-8d1c4b7e2a9f6035"
GITHUB_TOKEN = "ghp_" + "Q7w2E9r4T1y6U3i8O5p0A2s7D4f9G1h6J3k8"
URL_PASSWORD = "up-5e2b9d6a1c8f3047"


def test_printed_settings_hide_every_credential() -> None:
    settings = Settings(
        engine_key=ENGINE_KEY,  # type: ignore[arg-type]
        redis_url=f"redis://worker:{REDIS_PASSWORD}@redis.internal:6379/0",  # type: ignore[arg-type]
        github_token=GITHUB_TOKEN,  # type: ignore[arg-type]
    )
    printed = [repr(settings), str(settings), settings.model_dump_json(), repr(settings.model_dump())]
    for secret in (ENGINE_KEY, REDIS_PASSWORD, GITHUB_TOKEN):
        assert all(secret not in text for text in printed), secret
    assert settings.github_token is not None and settings.github_token.get_secret_value() == GITHUB_TOKEN


async def test_bearer_tokens_never_reach_a_log_an_answer_or_the_token_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with open_api(tmp_path) as api:
        good = api.token("reader", place="user:a")
        revoked_name, revoked = "gone", api.token("gone", place="user:b")
        api.tokens.revoke(revoked_name)
        wrong = {"Authorization": "Bearer tm_" + "x" * 40}
        answers = [
            await api.post("/v1/list", {"limit": 5}, headers=good),
            await api.post("/v1/recall", {"question": "zeolites", "limit": 3}, headers=good),
            await api.post("/v1/list", {"limit": 5, "cursor": "nonsense"}, headers=good),
            await api.post("/v1/list", {"limit": 5}, headers=revoked),
            await api.post("/v1/list", {"limit": 5}, headers=wrong),
            await api.client.get("/v1/sources", headers=good),
        ]
        token_file = api.settings.token_path.read_text()
    assert [answer.status_code for answer in answers[:3]] == [200, 200, 400]
    assert all(answer.status_code in (401, 403) for answer in answers[3:])
    for header in (good, revoked, wrong):
        secret = header["Authorization"].removeprefix("Bearer ")
        assert secret not in caplog.text
        assert all(secret not in answer.text and secret not in str(answer.headers) for answer in answers)
        assert secret not in token_file


@pytest.mark.parametrize(
    ("data", "mime"),
    [(b"%PDF-1.7\nnot really a pdf", "application/pdf"), (b"\x00\x01\x02", None), (b"PK\x03\x04broken", None)],
)
def test_a_credentialed_origin_never_reaches_a_conversion_error_or_a_log(
    data: bytes, mime: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    raw = RawDocument(data, mime=mime, origin=f"https://reader:{URL_PASSWORD}@docs.example/private/report")
    with pytest.raises(Error) as refused:
        convert_document(raw)
    assert "docs.example/private/report" in refused.value.message
    assert URL_PASSWORD not in str(refused.value) and URL_PASSWORD not in repr(refused.value)
    assert URL_PASSWORD not in caplog.text
