"""Suite-wide settings: how the tests share out among pytest-xdist's workers, and Hypothesis under load.

With `-n 2` (pyproject's default; `-n 0` runs everything in one process) the tests under `tests/integration/`,
`tests/e2e/`, `tests/reliability/` and `tests/browser/` start processes of their own (Celery workers,
`tinymemory up`, servers, a browser) and wait on them with deadlines set for one such test at a time, so they
form one unit of work: one worker runs them one after another, in file order, while the other worker takes the
rest, one test at a time. (xdist's own `loadgroup` cannot do this here: it renames test ids
in a way pytest 9 ignores.)
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling

# The processes tests start (Celery workers, `tinymemory up`, servers) embed with the packaged static model unless a
# test says otherwise. The product's default, MiniLM, embeds 10-20 passages a second on two cores: the hundreds of
# files those tests ingest, embedded in the background, lengthened the suite by two minutes. MiniLM is tested in
# process (tests/unit/engines/test_local_minilm.py, and every engine built without an embedder) and by `make run`
# as a newcomer runs it (tests/e2e/test_make_run_api.py, which clears this).
os.environ.setdefault("TINYMEMORY_ENGINES__LOCAL__EMBEDDER__KIND", "static")

PROCESS_UNIT = "tests that start processes"
# The browser tests also share one `tinymemory up` and build on each other's steps, so they must stay together.
_PROCESS_DIRS = ("tests/integration/", "tests/e2e/", "tests/reliability/", "tests/browser/")

# A loaded machine (other workers, other suites) makes data generation slow now and then; no finding about the code.
settings.register_profile("suite", suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")


class ProcessTestsTogether(LoadScopeScheduling):
    """Load scheduling where every process-starting test is in one scope and every other test is a scope alone."""

    def _split_scope(self, nodeid: str) -> str:
        return PROCESS_UNIT if nodeid.startswith(_PROCESS_DIRS) else nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> ProcessTestsTogether | None:
    # Only in place of plain `load` (what `-n` picks): an explicit `--dist` choice is kept.
    return ProcessTestsTogether(config, log) if config.getoption("dist") == "load" else None
