"""Every docker-compose.yml test runs once per set of services (compose profile) it defines."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.deploy.compose_sets import PROFILES, load_compose, selected


@pytest.fixture(scope="module", params=PROFILES)
def profile(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture(scope="module")
def compose(profile: str) -> dict[str, Any]:
    """docker-compose.yml as `docker compose --profile <profile>` sees it: that set's services only."""
    return selected(load_compose(), {profile})
