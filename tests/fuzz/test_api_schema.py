"""Schemathesis over the API's OpenAPI schema, within the CI budget: every operation is called with generated
requests (valid and invalid) against an app over a real local engine in a temporary folder, and every answer
must be one the schema documents: no server error, a documented status and content type, and a body that
conforms to the schema of that status.

The app, its seeded engine and state store, and the values the schema cannot tell the fuzzer (real tool names,
the seeded source and letter) are those of the longer run in `tests/integration/test_api_fuzz.py`, which checks
the error shape and sends more requests per operation; this one checks conformance on every run.
"""

from __future__ import annotations

import hypothesis
import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.fuzz.profiles import LONG_SCALE, is_long
from tests.integration.test_api_fuzz import LOOPBACK, _config, _openapi, fuzzed_app, fuzzed_services

__all__ = ["fuzzed_app", "fuzzed_services"]

# Generated requests per operation. In CI only those: schemathesis' coverage phase (its boundary and negative
# values, some 60 more requests per operation) would take most of the budget alone, and the slow run in
# `tests/integration/test_api_fuzz.py` has it; the long profile runs it too.
EXAMPLES = 12 * (LONG_SCALE if is_long() else 1)
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


def _budgeted() -> schemathesis.Config:
    config = _config()
    config.projects.default.generation.update(max_examples=EXAMPLES)
    config.projects.default.phases.coverage.enabled = is_long()
    return config


schema = schemathesis.openapi.from_dict(_openapi(), config=_budgeted())


@pytest.mark.timeout(60 * (LONG_SCALE if is_long() else 1))
@schema.parametrize()
@hypothesis.settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], deadline=None)
def test_every_answer_conforms_to_the_schema(case: schemathesis.Case, fuzzed_app: FastAPI) -> None:
    response = case.call(base_url=LOOPBACK, app=fuzzed_app)
    case.validate_response(response, checks=CHECKS)
