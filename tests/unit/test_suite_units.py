"""The suite's split into units of work (tests/conftest.py): the late files may share the machine with a Celery test,
so they must hold only tests that start no Celery worker and no browser."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import LATE_FILES, PROCESS_UNIT, unit_of

ROOT = Path(__file__).resolve().parents[2]
CELERY_OR_BROWSER = ("tests.integration.cluster", "celery_worker", "tinymemory worker", "playwright", "Cluster(")


def test_every_late_file_exists_and_starts_no_celery_worker_nor_browser() -> None:
    for name in sorted(LATE_FILES):
        text = (ROOT / name).read_text(encoding="utf-8")
        assert not [marker for marker in CELERY_OR_BROWSER if marker in text], name


def test_tests_go_to_their_units() -> None:
    assert unit_of("tests/unit/test_layout.py::test_x") == "tests/unit/test_layout.py::test_x"
    assert unit_of("tests/reliability/test_worker_kills.py::test_x") == PROCESS_UNIT
    assert unit_of("tests/browser/test_console_browser.py::test_x") == PROCESS_UNIT
    assert unit_of("tests/integration/test_mcp.py::test_x[a::b]") == "tests/integration/test_mcp.py"
    assert unit_of("tests/e2e/test_make_run_api.py::test_x") == "tests/e2e/test_make_run_api.py"
