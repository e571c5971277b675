"""The API's own Prometheus metrics: requests by route and status, and their latency, served at `/metrics`."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response
from prometheus_client import CollectorRegistry, Counter, Histogram

REGISTRY = CollectorRegistry()
REQUESTS = Counter("tinymemory_api_requests_total", "API requests answered", ["route", "status"], registry=REGISTRY)
SECONDS = Histogram(
    "tinymemory_api_request_seconds",
    "Time to answer an API request",
    ["route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10),
    registry=REGISTRY,
)


def count_requests(app: FastAPI) -> None:
    """Count every request by its route's template (not its path: ids would explode the label set)."""

    @app.middleware("http")
    async def measure(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        started = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        template = getattr(route, "path", "unmatched")
        REQUESTS.labels(route=template, status=str(response.status_code)).inc()
        SECONDS.labels(route=template).observe(time.perf_counter() - started)
        return response
