"""`DoubleConfig`: what the CortexDB double reproduces, with a switch wherever server versions differ
(docs/spec/cortexdb.md §13.2)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

PRESET_SCOPE_TYPES = frozenset(
    {"org", "dept", "team", "app", "user", "agent", "service", "ws", "project", "global", "system", "source"}
)
HOSTED_RATE_LIMIT = 300


class ManualClock:
    """A clock tests move by hand, so expiries and lags pass without sleeping."""

    def __init__(self, start: float = 1_767_225_600.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds


@dataclass
class DoubleConfig:
    """One double serves one wire. Fields follow docs/spec/cortexdb.md §13.2; `tenants` maps a bearer to its own tenant
    prefix on the hosted wire (any other bearer is `tenant_prefix`), so two accounts can share one double."""

    wire: Literal["direct", "hosted"] = "direct"
    api_key: str | None = None
    caller: str | None = "user:local"
    require_actor: bool = False
    listing_duplicates: bool = True
    default_list_limit: int = 50
    max_text_bytes: int = 1_048_576
    max_labels: int = 64
    max_label_bytes: int = 256
    allowed_scope_types: frozenset[str] | None = PRESET_SCOPE_TYPES
    pack_ttl_s: float = 60.0
    idempotency_ttl_s: float = 86_400.0
    forget_releases_keys: bool = True
    default_cascade: str = "derived_only"
    recall_role_prefix: bool = False
    default_events_per_pack: int = 10
    default_max_tokens: int = 4000
    bytes_per_token: int = 3
    listing_lag_s: float = 0.0
    recall_lag_s: float = 0.0
    wait_timeout_s: float = 5.0
    erasure_polls_before_done: int = 0
    answer_available: bool = True
    tenant_prefix: str = "org:tenant-1"
    expose_tenant_prefix: bool = True
    hosted_scopes_shape: Literal["scopes", "items"] = "scopes"
    hosted_conflict_status: int = 409
    hosted_require_body_key: bool = True
    rate_limit_per_minute: int | Literal["wire"] | None = "wire"
    clock: Callable[[], float] = time.time
    tenants: dict[str, str] = field(default_factory=dict)

    @property
    def hosted(self) -> bool:
        return self.wire == "hosted"

    def rate_limit(self) -> int | None:
        """Requests per bearer per minute: by default none on Direct and 300 on the hosted wire."""
        if self.rate_limit_per_minute == "wire":
            return HOSTED_RATE_LIMIT if self.hosted else None
        return self.rate_limit_per_minute

    def manual(self) -> bool:
        return isinstance(self.clock, ManualClock)
