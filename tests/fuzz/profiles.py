"""The fuzzers' budgets: one hypothesis profile for CI, one for running by hand.

`ci` (the default) is derandomized with a fixed number of examples per test and a deadline per example, so the
whole of `tests/fuzz` takes the same, bounded time on every run (sized for 45 s on a 2-core machine) and a failure
repeats. `long` multiplies every test's examples by `LONG_SCALE`, draws fresh random inputs each run and keeps
hypothesis' example database, so a failure found once is tried first next time:

    TINYMEMORY_FUZZ=long .venv/bin/pytest tests/fuzz -q --timeout 0

Each test states its own CI budget with `@fuzzed(n)`; the profiles are registered under their own names and
applied per test, never loaded globally, so the rest of the suite keeps hypothesis' defaults.
"""

from __future__ import annotations

import os
from datetime import timedelta

from hypothesis import HealthCheck, settings

PROFILE_ENV = "TINYMEMORY_FUZZ"
CI = "fuzz-ci"
LONG = "fuzz-long"
LONG_SCALE = 50

# A shared 2-core machine stalls now and then; the deadline is there to catch a parser gone quadratic, not a
# slow scheduler, so it sits far above the few milliseconds one example takes.
CI_DEADLINE = timedelta(seconds=2)

settings.register_profile(
    CI,
    derandomize=True,
    database=None,
    deadline=CI_DEADLINE,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.register_profile(
    LONG,
    derandomize=False,
    deadline=CI_DEADLINE * 5,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def profile_name() -> str:
    """The profile `TINYMEMORY_FUZZ` names (`ci` or `long`); `ci` when unset."""
    chosen = os.environ.get(PROFILE_ENV, "ci").strip().lower()
    if chosen not in ("ci", "long"):
        raise ValueError(f"{PROFILE_ENV} must be `ci` or `long`, not {chosen!r}")
    return LONG if chosen == "long" else CI


def is_long() -> bool:
    return profile_name() == LONG


def fuzzed(examples: int, deadline: timedelta | None = None) -> settings:
    """The settings of a fuzz test that tries `examples` inputs in CI (`LONG_SCALE` times as many by hand),
    each within `deadline` (the profile's when None)."""
    parent = settings.get_profile(profile_name())
    scale = LONG_SCALE if is_long() else 1
    if deadline is None:
        return settings(parent, max_examples=examples * scale)
    return settings(parent, max_examples=examples * scale, deadline=deadline * (5 if is_long() else 1))
