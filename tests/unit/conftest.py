"""Fixtures shared by the unit tests: a CortexDB double on loopback for each wire, served once per session (per
xdist worker) when a test asks for one, and reset for every test."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from tests.fixtures.cortex_double import Served, config, served


@pytest.fixture(scope="session")
def _direct_server() -> Iterator[Served]:
    with served("direct") as server:
        yield server


@pytest.fixture(scope="session")
def _hosted_server() -> Iterator[Served]:
    with served("hosted") as server:
        yield server


def _fresh(server: Served) -> Served:
    """The shared double as new: empty, without faults, its configuration back to the defaults."""
    default = config("hosted" if server.wire.hosted else "direct")
    for field in dataclasses.fields(default):
        setattr(server.double.config, field.name, getattr(default, field.name))
    server.double.reset()
    return server


@pytest.fixture
def direct(_direct_server: Served) -> Served:
    return _fresh(_direct_server)


@pytest.fixture
def hosted(_hosted_server: Served) -> Served:
    return _fresh(_hosted_server)


@pytest.fixture(params=["direct", "hosted"])
def either(request: pytest.FixtureRequest) -> Served:
    return _fresh(request.getfixturevalue(f"_{request.param}_server"))
