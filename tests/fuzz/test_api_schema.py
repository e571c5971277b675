"""Schemathesis over the API's OpenAPI schema, within the CI budget: every operation is called with generated
requests (valid and invalid) against an app over a real local engine in a temporary folder, and every answer
must be one the schema documents: no server error, a documented status and content type, and a body that
conforms to the schema of that status.

The app, its seeded engine and state store, and the values the schema cannot tell the fuzzer (real tool names,
the seeded source and letter) are those of the longer run in `tests/integration/test_api_fuzz.py`, which checks
the error shape and sends more requests per operation; this one checks conformance on every run.
"""

from __future__ import annotations

from typing import Any

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

from tests.fuzz.profiles import LONG_SCALE, is_long, profile_name
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


# Workflows along the links schemathesis infers (create a source, then read, sync or delete it; ask for an
# erasure or a legacy import, then read its receipt): what one call creates, the next one names.
APIWorkflow = schema.as_state_machine()
WORKFLOWS = 6 * (LONG_SCALE if is_long() else 1)


@pytest.mark.timeout(60 * (LONG_SCALE if is_long() else 1))
def test_workflows_along_the_schemas_links_conform(fuzzed_app: FastAPI) -> None:
    called: list[str] = []

    class Workflow(APIWorkflow):  # type: ignore[misc, valid-type]
        def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
            return {"base_url": LOOPBACK, "app": fuzzed_app}

        def validate_response(self, response: Any, case: schemathesis.Case, *args: Any, **kwargs: Any) -> None:
            called.append(case.operation.label)
            case.validate_response(response, checks=CHECKS)

    Workflow.run(
        settings=hypothesis.settings(
            hypothesis.settings.get_profile(profile_name()),
            max_examples=WORKFLOWS,
            stateful_step_count=6,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
    )
    # Each scenario chains at least one call into another, so the runs exercised the links.
    assert len(called) > WORKFLOWS, called
