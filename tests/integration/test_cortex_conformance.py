"""The CortexDB engine passes the conformance suite on both wires, in both layouts, and as two tenants.

Each run goes over real HTTP on loopback to the CortexDB double, so the engine's transport, parsing and waiting
all run as they do against a server.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engines.conformance import run, run_isolation
from engines.cortex import CortexEngine, CortexWire, Timing
from engines.settings import EngineCredential
from tinymemory_ingest.cortex_double import CortexDouble, DoubleConfig, serve

pytestmark = pytest.mark.integration


@pytest.fixture(params=["direct", "hosted"])
def double(request: pytest.FixtureRequest) -> Iterator[tuple[CortexWire, str, CortexDouble]]:
    tenants = {"key-a": "org:account-a", "key-b": "org:account-b"}
    config = DoubleConfig(wire=request.param, rate_limit_per_minute=None, tenants=tenants)
    double = CortexDouble(config)
    wire = CortexWire.TINYHUMANS if request.param == "hosted" else CortexWire.DIRECT
    with serve(double) as url:
        yield wire, url, double


def _engine(wire: CortexWire, url: str, key: str = "test-key", root: str | None = None) -> CortexEngine:
    roots = {"tenant_root": root} if wire.hosted else {"scope_root": root}
    return CortexEngine(wire, url, EngineCredential.of(key), timing=Timing.fast(), **roots)


@pytest.mark.parametrize("root", [None, "root"], ids=["legacy layout", "scope root"])
async def test_the_suite_passes_and_leaves_nothing_behind(
    double: tuple[CortexWire, str, CortexDouble], root: str | None
) -> None:
    wire, url, served = double
    # The hosted wire's v3 root is the tenant's own: the backend re-roots every scope under it.
    chosen = None if root is None else ("org:tenant-1" if wire.hosted else "user:42")
    async with _engine(wire, url, root=chosen) as engine:
        await run(engine)
    assert served.events() == []  # cleanup forgot everything the run stored
    written = {scope for r in served.requests for scope in _written_scopes(r.path, r.body)}
    prefix = "app:tinymemory/" if root is None else ("" if wire.hosted else "user:42/")
    assert written and all(scope.startswith(prefix) for scope in written)
    assert (root is None) == all("app:tinymemory" in scope for scope in written)


def _written_scopes(path: str, body: object) -> list[str]:
    if not isinstance(body, dict):
        return []
    if path.endswith("experience/bulk"):
        return [item["scope"] for item in body["items"]]
    return [body["scope"]] if path.endswith("experience") else []


async def test_two_tenants_share_nothing(double: tuple[CortexWire, str, CortexDouble]) -> None:
    wire, url, _ = double
    if wire.hosted:
        # Two accounts of one backend: each bearer is its own tenant.
        a, b = _engine(wire, url, key="key-a"), _engine(wire, url, key="key-b")
    else:
        # Two people on one CortexDB, each below a scope root of their own.
        a, b = _engine(wire, url, root="user:alice"), _engine(wire, url, root="user:bob")
    async with a, b:
        await run_isolation(a, b)
