"""The conformance suite: checks any `MemoryEngine` against the contract (docs/spec/contract.md §18).

`run(engine)` runs the checks named in `CHECKS` in order and cleans up after itself;
`run_isolation(a, b)` checks that two users' handles on one store share nothing. Both raise a
`ConformanceError` (`CheckFailed` or `CallFailed`) naming the check that failed. The suite uses
only the contract and the standard library; `ReferenceEngine` is re-exported as the engine that
passes by definition.
"""

from engines.conformance.errors import CallFailed, CheckFailed, ConformanceError
from engines.conformance.isolation import run_isolation
from engines.conformance.runner import CHECKS, run
from engines.reference import ReferenceEngine

__all__ = [
    "CHECKS",
    "CallFailed",
    "CheckFailed",
    "ConformanceError",
    "ReferenceEngine",
    "run",
    "run_isolation",
]
