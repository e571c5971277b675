"""The command line in embedded mode (SQLite state, local engine), driven in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tinymemory_ingest.cli import app


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TINYMEMORY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TINYMEMORY_CONVERT_WORKERS", "1")
    monkeypatch.delenv("TINYMEMORY_CONFIG", raising=False)
    runner = CliRunner()

    def invoke(*args: str) -> tuple[int, str]:
        result = runner.invoke(app, list(args), catch_exceptions=False)
        return result.exit_code, result.stdout

    return invoke


def _notes(root: Path) -> Path:
    folder = root / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "plan.md").write_text("# Plan\n\nThe quarzite launch is on Friday.\n")
    (folder / "sub" / "bad.md").write_bytes(b"\xff\xfe not text")
    return folder


def test_version_and_help(run) -> None:  # type: ignore[no-untyped-def]
    code, out = run("version")
    assert code == 0 and out.startswith("tinymemory-ingest ")


def test_ingest_then_read_commands(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = _notes(tmp_path)
    code, out = run("ingest", str(folder), "--json")
    assert code == 0
    summary = json.loads(out.strip().splitlines()[-1])
    assert (summary["files_listed"], summary["items_stored"], summary["errors"]) == (2, 1, 1)
    # Both times from the sync's start: keyword-searchable at its end, and every vector stored after.
    assert summary["seconds_to_searchable"] == summary["seconds"] > 0
    assert summary["vectors_waiting"] == 0 and summary["seconds_to_vectors"] >= summary["seconds_to_searchable"]

    code, out = run("fetch", "quarzite", "--mode", "keyword", "--json")
    hits = json.loads(out)["hits"]
    assert code == 0 and len(hits) == 1 and hits[0]["meta"]["file_path"].endswith("plan.md")
    code, out = run("recall", "when is the quarzite launch?", "--json")
    assert code == 0 and "Friday" in json.loads(out)["answer"]
    code, out = run("list", "--json")
    assert code == 0 and len(json.loads(out)["hits"]) == 1
    code, out = run("dlq", "list", "--json")
    (letter,) = json.loads(out)
    assert (letter["unit_id"], letter["stage"]) == ("sub/bad.md", "convert")


def test_fetch_refuses_an_unknown_mode(run) -> None:  # type: ignore[no-untyped-def]
    runner = CliRunner()
    result = runner.invoke(app, ["fetch", "x", "--mode", "psychic"])
    assert result.exit_code != 0 and "mode must be one of keyword, vector, hybrid" in result.output


def test_sources_add_list_show_sync_rm(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = _notes(tmp_path)
    code, source_id = run("sources", "add", "folder", str(folder), "--id", "notes", "--namespace", "team:acme")
    assert (code, source_id.strip()) == (0, "notes")
    code, out = run("sources", "list", "--json")
    assert [s["id"] for s in json.loads(out)] == ["notes"]
    code, out = run("sources", "sync", "notes")
    assert code == 0 and "synced: 2 changed" in out
    code, out = run("sources", "show", "notes", "--json")
    shown = json.loads(out)
    assert (shown["units"], shown["dead_letters"], shown["source"]["namespace"]) == (1, 1, "team:acme")
    code, out = run("sources", "rm", "notes")
    assert code == 0 and "1 items forgotten" in out
    code, out = run("list", "--json")
    assert json.loads(out)["hits"] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("sources", "add", "rss", "ftp://example.com/feed"), "is not a feed URL"),
        (("sources", "add", "folder", "NOTES", "--branch", "main"), "branch does not apply to folder sources"),
        (("sources", "add", "folder", "/nonexistent/path"), "does not exist"),
        (("sources", "add", "folder", "NOTES_FILE"), "is not a folder"),
        (("sources", "add", "folder", "NOTES", "--namespace", "robot:x"), "is not a namespace segment kind"),
        (("sources", "show", "nope"), "no source 'nope'"),
    ],
)
def test_sources_refusals_name_the_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args, message) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TINYMEMORY_DATA_DIR", str(tmp_path / "data"))
    folder = _notes(tmp_path)
    args = tuple(str(folder / "plan.md") if a == "NOTES_FILE" else str(folder) if a == "NOTES" else a for a in args)
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 2
    assert message in result.output


def test_dlq_replay_retries_and_purge_clears(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = _notes(tmp_path)
    run("sources", "add", "folder", str(folder), "--id", "notes")
    run("sources", "sync", "notes")
    (folder / "sub" / "bad.md").write_text("fixed: now readable\n")
    code, out = run("dlq", "replay")
    assert code == 0 and "notes: 1 units" in out
    code, out = run("dlq", "list", "--json")
    assert json.loads(out) == []
    (folder / "sub" / "bad.md").write_bytes(b"\xff broken again")
    run("sources", "sync", "notes")
    code, out = run("dlq", "purge")
    assert code == 0 and "1 dead letters purged" in out


def test_config_prints_settings_with_secrets_masked(run, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TINYMEMORY_ENGINE_KEY", "sk-super-secret")
    monkeypatch.setenv("TINYMEMORY_REDIS_URL", "redis://:hunter2@redis.internal:6379/0")
    code, out = run("config")
    shown = json.loads(out)
    assert code == 0 and "sk-super-secret" not in out and "hunter2" not in out
    assert shown["engine_key"] == "**********"


def test_a_toml_config_file_is_read_and_environment_wins(run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "tinymemory.toml"
    config.write_text('engine = "reference"\nmax_file_mb = 3.5\nconvert_timeout_s = 12\n')
    monkeypatch.setenv("TINYMEMORY_CONVERT_TIMEOUT_S", "7")
    code, out = run("config", "--config", str(config))
    shown = json.loads(out)
    assert code == 0
    assert (shown["engine"], shown["max_file_mb"], shown["convert_timeout_s"]) == ("reference", 3.5, 7.0)


def test_ingest_shows_each_dead_letter_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINYMEMORY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TINYMEMORY_CONVERT_WORKERS", "1")
    folder = _notes(tmp_path)
    result = CliRunner().invoke(app, ["ingest", str(folder)], catch_exceptions=False)
    assert result.exit_code == 0
    mentions = [line for line in result.output.splitlines() if "sub/bad.md" in line]
    assert len(mentions) == 1, result.output  # in the summary, not also as a log line while the bar runs
    assert "not valid UTF-8" in result.output


def test_a_second_source_under_a_taken_id_is_refused_in_one_line(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = _notes(tmp_path)
    assert run("sources", "add", "folder", str(folder), "--id", "notes")[0] == 0
    assert run("sources", "add", "folder", str(folder), "--id", "notes")[0] == 0  # the same again: no change
    result = CliRunner().invoke(app, ["sources", "add", "folder", str(folder / "sub"), "--id", "notes"])
    assert result.exit_code == 2
    assert "a source 'notes' exists with other settings" in result.output and "Traceback" not in result.output


def test_status_works_embedded(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = _notes(tmp_path)
    run("sources", "add", "folder", str(folder), "--id", "notes")
    run("sources", "sync", "notes")
    code, out = run("status", "--json")
    shown = json.loads(out)
    assert code == 0 and (shown["queues"], shown["workers"], shown["dead_letters"]) == (None, None, 1)
    assert [(s["id"], s["units"]) for s in shown["sources"]] == [("notes", 1)]
    assert shown["vectors"]["waiting"] in (0, 1)  # the one note's passage: embedded by now, or still waiting
    code, out = run("ingest", str(folder), "--json", "--no-wait-vectors")
    summary = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and (summary["seconds_to_vectors"], summary["vectors_waiting"]) == (None, None)
    code, out = run("status")
    assert code == 0 and "vectors: " in out


def test_sources_kinds_lists_what_this_build_offers(run, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TINYMEMORY_SOURCE_KINDS", '{"memory_test": "tests.fixtures.memory_source"}')
    code, out = run("sources", "kinds", "--json")
    kinds = {kind["name"]: kind for kind in json.loads(out)}
    assert code == 0 and all(kind["available"] for kind in kinds.values())
    assert set(kinds) == {"folder", "file", "link", "github", "rss", "conversation", "memory_test"}
    assert kinds["link"]["kind"] == "web_page" and kinds["link"]["target"] == "url"
    assert kinds["memory_test"]["target"] == "path"
    from sources import REGISTRY

    REGISTRY.unregister("memory_test")


def test_tokens_are_shown_once_listed_without_secrets_and_revoked(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, out = run("tokens", "add", "alice", "--place", "user:alice", "--read-only")
    token = out.strip()
    assert code == 0 and token.startswith("tm_") and len(token) > 30
    stored = (tmp_path / "data" / "tokens.json").read_text()
    assert token not in stored and "alice" in stored
    code, out = run("tokens", "list", "--json")
    (listed,) = json.loads(out)
    assert (listed["name"], listed["place"], listed["read_only"], listed["admin"]) == (
        "alice",
        "user:alice",
        True,
        False,
    )
    assert token not in out
    again = CliRunner().invoke(app, ["tokens", "add", "alice"])
    assert again.exit_code == 2 and "a token named 'alice' exists" in again.output
    bad = CliRunner().invoke(app, ["tokens", "add", "bob", "--place", "robot:x"])
    assert bad.exit_code == 2 and "is not a namespace segment kind" in bad.output
    code, out = run("tokens", "revoke", "alice")
    assert code == 0 and json.loads(run("tokens", "list", "--json")[1]) == []
    missing = CliRunner().invoke(app, ["tokens", "revoke", "alice"])
    assert missing.exit_code == 2 and "no token named 'alice'" in missing.output


def test_serve_refuses_to_listen_beyond_loopback_without_tokens(run) -> None:  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--port", "0"])
    assert result.exit_code == 2
    assert "with no tokens" in result.output and "TINYMEMORY_API_HOST" in result.output
    assert "Traceback" not in result.output


def test_serve_refuses_a_port_out_of_range_in_one_line(run) -> None:  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(app, ["serve", "--port", "99999"])
    assert result.exit_code == 2 and "--port" in result.output
    assert "OverflowError" not in result.output and "Traceback" not in result.output
