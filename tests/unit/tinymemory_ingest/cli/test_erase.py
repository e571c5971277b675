"""`tinymemory erase` in embedded mode, driven in-process: the id at once, the receipt, refusals in one line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tinymemory_ingest.cli import app

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    monkeypatch.setenv("TINYMEMORY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TINYMEMORY_CONVERT_WORKERS", "1")
    monkeypatch.delenv("TINYMEMORY_CONFIG", raising=False)
    runner = CliRunner()

    def invoke(*args: str) -> tuple[int, str, str]:
        result = runner.invoke(app, list(args), catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr

    return invoke


def _ingested(run: Run, tmp_path: Path, files: int = 3) -> str:
    folder = tmp_path / "notes"
    folder.mkdir()
    for n in range(files):
        (folder / f"n{n}.md").write_text(f"# note {n}\n\nthe glimmerstone fact {n}\n")
    code, _, _ = run("ingest", str(folder), "--json")
    assert code == 0
    code, out, _ = run("sources", "list", "--json")
    (source,) = json.loads(out)
    return str(source["id"])


def test_erase_source_prints_the_id_then_the_receipt(run: Run, tmp_path: Path) -> None:
    source_id = _ingested(run, tmp_path)
    code, out, _ = run("erase", "source", source_id)
    assert code == 0, out
    erasure_id, summary = out.split("\n", 1)
    assert len(erasure_id) == 32 and f"{erasure_id}  completed  source {source_id!r}" in summary
    assert "3 items forgotten" in summary and "nothing left after 1 look(s)" in summary
    code, out, _ = run("list", "--json")
    assert json.loads(out)["hits"] == []
    code, out, _ = run("erase", "status", erasure_id, "--json")
    receipt = json.loads(out)
    assert (receipt["status"], receipt["requested_by"], receipt["forgotten"]) == ("completed", "cli", 3)
    assert receipt["target"] == {"source_id": source_id, "namespace": None, "kinds": []}
    code, out, _ = run("erase", "source", source_id, "--json")  # the same request: the first receipt
    assert out.splitlines()[0] == erasure_id and json.loads(out.splitlines()[1])["id"] == erasure_id
    code, out, _ = run("sources", "list", "--json")
    assert json.loads(out) == []  # purged


def test_erase_namespace_with_kinds(run: Run) -> None:
    code, out, _ = run("erase", "namespace", "user:a", "--kinds", "learning,document", "--json")
    assert code == 0
    receipt = json.loads(out.splitlines()[1])
    assert receipt["target"] == {"source_id": None, "namespace": "user:a", "kinds": ["document", "learning"]}
    assert (receipt["status"], receipt["method"]) == ("completed", "erase")
    code, out, _ = run("erase", "status", receipt["id"])
    assert code == 0 and "namespace 'user:a' (document, learning only)" in out


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (("erase", "source", "nope"), "no source 'nope'"),
        (("erase", "status", "nope"), "no erasure 'nope'"),
    ],
)
def test_refusals_are_one_line_and_status_2(run: Run, args: tuple[str, ...], problem: str) -> None:
    code, _, err = run(*args)
    assert code == 2 and problem in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (("erase", "namespace", "root"), "erasing the root namespace"),
        (("erase", "namespace", "bogus:x"), "is not a namespace segment kind"),
        (("erase", "source", "a", "--kinds", "facts"), "document"),
    ],
)
def test_bad_targets_are_usage_errors(run: Run, args: tuple[str, ...], problem: str) -> None:
    code, _, err = run(*args)
    assert code == 2 and problem in " ".join(err.split())
