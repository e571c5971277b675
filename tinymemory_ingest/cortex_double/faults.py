"""Fault injection for the CortexDB double (docs/spec/cortexdb.md §13.12), steered in process or over HTTP.

Each rule may be limited to paths by a glob (`match="v1/events*"`, without the leading slash) and to a method.
A rule with a count is used up by that many matching requests; `delay` without a count holds every match.
"""

from __future__ import annotations

import fnmatch
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engines.contract import InvalidRequestError


@dataclass
class Rule:
    knob: str
    remaining: int | None
    status: int = 503
    code: str = "UPSTREAM_UNAVAILABLE"
    retry_after: int | None = None
    match: str | None = None
    method: str | None = None
    after_claim: bool = False
    seconds: float = 0.0
    after: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.method is not None and self.method.upper() != method:
            return False
        return self.match is None or fnmatch.fnmatchcase(path, self.match)


class Faults:
    """The double's fault rules; thread-safe, since tests steer them while the server runs."""

    def __init__(self, clock: Callable[[], float], on_expire_packs: Callable[[], None]) -> None:
        self._clock = clock
        self._expire_packs = on_expire_packs
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self.hidden_until = 0.0
        self.never_listed = 0

    def _add(self, rule: Rule) -> None:
        with self._lock:
            self._rules.append(rule)

    def fail_next(
        self,
        n: int,
        status: int = 503,
        code: str = "UPSTREAM_UNAVAILABLE",
        retry_after: int | None = None,
        match: str | None = None,
        method: str | None = None,
        after_claim: bool = False,
        after: int = 0,
    ) -> None:
        """The next `n` matching requests fail with `status` without being applied (`after` of them let through
        first: a batch refused part way)."""
        self._add(Rule("fail", n, status, code, retry_after, match, method, after_claim, after=after))

    def fail_after_apply(self, n: int, status: int = 503, match: str | None = None, method: str | None = None) -> None:
        """The next `n` matching writes are applied, then answered with the failure: the outcome-unknown case."""
        self._add(Rule("fail_after_apply", n, status, match=match, method=method))

    def delay(self, seconds: float, n: int | None = None, match: str | None = None, method: str | None = None) -> None:
        """Hold matching requests for `seconds` before serving them (every one while `n` is None)."""
        self._add(Rule("delay", n, match=match, method=method, seconds=seconds))

    def drop_connection(self, n: int, match: str | None = None, method: str | None = None) -> None:
        """Close the next `n` matching connections before any byte of an answer body is sent."""
        self._add(Rule("drop", n, match=match, method=method))

    def truncate_body(self, n: int, match: str | None = None, method: str | None = None) -> None:
        """Declare the whole `Content-Length` of the next `n` matching answers, then close half way."""
        self._add(Rule("truncate", n, match=match, method=method))

    def insufficient_credits(self, n: int) -> None:
        self._add(Rule("credits", n, 402, "USER_INSUFFICIENT_CREDITS"))

    def erasure_incomplete(self, n: int) -> None:
        self._add(Rule("erasure_incomplete", n, 502, "ERASURE_INCOMPLETE"))

    def hide_events(self, seconds: float) -> None:
        """Events accepted during the next `seconds` are neither listed nor ranked until that window has passed."""
        with self._lock:
            self.hidden_until = max(self.hidden_until, self._clock() + seconds)

    def never_list(self, n: int) -> None:
        with self._lock:
            self.never_listed += n

    def expire_packs(self) -> None:
        self._expire_packs()

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()
            self.hidden_until = 0.0
            self.never_listed = 0

    def take(self, knob: str, method: str, path: str) -> Rule | None:
        """The first live rule of `knob` matching the request, used up by one."""
        with self._lock:
            for rule in self._rules:
                if rule.knob == knob and rule.matches(method, path):
                    if rule.after > 0:
                        rule.after -= 1
                        continue
                    if rule.remaining is not None:
                        rule.remaining -= 1
                        if rule.remaining <= 0:
                            self._rules.remove(rule)
                    return rule
        return None

    def listing_delay(self, accepted_at: float) -> float:
        """When an event accepted at `accepted_at` may be listed at the earliest (infinity: never)."""
        with self._lock:
            if self.never_listed > 0:
                self.never_listed -= 1
                return float("inf")
            return self.hidden_until if accepted_at < self.hidden_until else accepted_at

    # -- over HTTP ------------------------------------------------------------------------------------

    _KNOBS = (
        "fail_next",
        "fail_after_apply",
        "delay",
        "drop_connection",
        "truncate_body",
        "insufficient_credits",
        "erasure_incomplete",
        "hide_events",
        "never_list",
        "expire_packs",
        "clear",
    )

    def apply(self, request: Any) -> None:
        """Apply `{"knob": name, ...arguments}` or a list of them (the body of `POST /__double__/faults`)."""
        for entry in request if isinstance(request, list) else [request]:
            if not isinstance(entry, dict) or entry.get("knob") not in self._KNOBS:
                raise InvalidRequestError(f"a fault needs a `knob` among {', '.join(self._KNOBS)}")
            arguments = {key: value for key, value in entry.items() if key != "knob"}
            try:
                getattr(self, entry["knob"])(**arguments)
            except TypeError as err:
                raise InvalidRequestError(f"fault `{entry['knob']}` cannot take {sorted(arguments)}") from err
