"""Suite-wide settings: how the tests share out among pytest-xdist's workers, and Hypothesis under load.

With `-n 2` (pyproject's default; `-n 0` runs everything in one process) the tests under `tests/integration/`,
`tests/e2e/`, `tests/reliability/` and `tests/browser/` start processes of their own (Celery workers,
`tinymemory up`, servers, a browser) and wait on them with deadlines set for one such test at a time beside an
in-process test. So they are shared out as follows:
- every test that starts Celery workers or a browser is in one unit of work, which one worker starts at once and
  runs to its end, one test after another, in file order;
- the other worker runs the in-process tests, each a unit of its own, one at a time;
- the late files (`LATE_FILES`: tests that start at most `tinymemory` and its pools, or a server of ours, and no
  Celery worker nor browser), each file a unit, are handed out only once every in-process test has been: to
  whichever worker is free.
So two process-starting tests share the machine only at the end of a run, and never two that start Celery workers.
(xdist's own `loadgroup` cannot do this here: it renames test ids in a way pytest 9 ignores.) Measured alone on
this 2-core machine: the Celery and browser unit about 460 s, the in-process tests 330 s, the late files 190 s.
With every process-starting test in one unit, that unit alone was the whole run's length: 690 s.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling
from xdist.workermanage import WorkerController

# The processes tests start (Celery workers, `tinymemory up`, servers) embed with the packaged static model unless a
# test says otherwise. The product's default, MiniLM, embeds 10-20 passages a second on two cores: the hundreds of
# files those tests ingest, embedded in the background, lengthened the suite by two minutes. MiniLM is tested in
# process (tests/unit/engines/local/test_minilm.py, and every engine built without an embedder) and by `make run`
# as a newcomer runs it (tests/e2e/test_make_run_api.py, which clears this).
os.environ.setdefault("TINYMEMORY_ENGINES__LOCAL__EMBEDDER__KIND", "static")

PROCESS_UNIT = "tests that start processes"
# The browser tests also share one `tinymemory up` and build on each other's steps, so they must stay together.
_PROCESS_DIRS = ("tests/integration/", "tests/e2e/", "tests/reliability/", "tests/browser/")
LATE_FILES = frozenset(
    {
        "tests/e2e/test_archive_members.py",
        "tests/e2e/test_embedded_pipeline.py",
        "tests/e2e/test_erase_embedded.py",
        "tests/e2e/test_ingest_crash.py",
        "tests/e2e/test_legacy_import.py",
        "tests/e2e/test_legacy_import_engines.py",
        "tests/e2e/test_legacy_import_job.py",
        "tests/e2e/test_make_run_api.py",
        "tests/e2e/test_ocr_ingest.py",
        "tests/e2e/test_plugin_distribution.py",
        "tests/e2e/test_text_pool.py",
        "tests/e2e/test_up_watch.py",
        "tests/e2e/test_wheel_install.py",
        "tests/integration/test_api_fuzz.py",
        "tests/integration/test_cortex_conformance.py",
        "tests/integration/test_cortex_dev.py",
        "tests/integration/test_cortex_sdk.py",
        "tests/integration/test_erased_store_stdio.py",
        "tests/integration/test_erasure_cortex.py",
        "tests/integration/test_local_openai.py",
        "tests/integration/test_local_processes.py",
        "tests/integration/test_local_sentence.py",
        "tests/integration/test_mcp.py",
        "tests/reliability/test_hostile_files.py",
        "tests/reliability/test_hostile_urls.py",
        "tests/reliability/test_planted_secrets.py",
    }
)

# A loaded machine (other workers, other suites) makes data generation slow now and then; no finding about the code.
settings.register_profile("suite", suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: the process-starting unit, its file (a late file), or its own."""
    if not nodeid.startswith(_PROCESS_DIRS):
        return nodeid
    path = nodeid.split("::", 1)[0]
    return path if path in LATE_FILES else PROCESS_UNIT


class ProcessTestsTogether(LoadScopeScheduling):
    """Load scheduling by `unit_of`, the late files handed out only once nothing else is left to hand out."""

    _late_moved = False

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)

    def _assign_work_unit(self, node: WorkerController) -> None:
        # The queue is ordered largest unit first, which puts the late files before the one-test units; they go
        # behind them once, before the first unit is handed out (nothing joins the queue after that).
        if not self._late_moved:
            for scope in [scope for scope in self.workqueue if scope in LATE_FILES]:
                self.workqueue.move_to_end(scope)
            self._late_moved = True
        super()._assign_work_unit(node)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> ProcessTestsTogether | None:
    # Only in place of plain `load` (what `-n` picks): an explicit `--dist` choice is kept.
    return ProcessTestsTogether(config, log) if config.getoption("dist") == "load" else None
