"""Numeric bounds of the contract, each defined once."""

from __future__ import annotations

MAX_STORE_MANY = 100
"""Items per `store_many` call (1..100)."""

MAX_GET_IDS = 200
"""Ids per `GetRequest` (1..200)."""

MAX_BUCKETS = 500
"""`ExploreRequest.limit` bound (1..500)."""

MAX_SCAN_LIMIT = 50_000
"""`ExploreRequest.scan_limit` bound (1..50000)."""

DEFAULT_SCAN_LIMIT = 5_000
"""`ExploreRequest.scan_limit` when absent."""

LISTING_PAGE = 200
"""Page size the listing-based defaults ask `list` for."""
