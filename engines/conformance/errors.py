"""What the conformance suite raises when an engine breaks the contract.

ConformanceError        check: detail
├── CheckFailed         the engine answered wrongly (or returned where it had to refuse)
└── CallFailed          a call the engine must serve raised; the contract error is `.error`
"""

from __future__ import annotations

from engines.contract import Error


class ConformanceError(Exception):
    """An engine failed the named check; `str()` is `"{check}: {detail}"`."""

    def __init__(self, check: str, detail: str) -> None:
        super().__init__(check, detail)
        self.check = check
        self.detail = detail

    def __str__(self) -> str:
        return f"{self.check}: {self.detail}"


class CheckFailed(ConformanceError):  # noqa: N818 - the name is fixed by docs/spec/contract.md §18.1
    """The engine answered wrongly: a wrong result, or a refusal that did not come or came as another kind."""


class CallFailed(ConformanceError):  # noqa: N818 - the name is fixed by docs/spec/contract.md §18.1
    """A call the engine must serve raised a contract error, kept in `error` and as `__cause__`."""

    def __init__(self, check: str, detail: str, error: Error) -> None:
        super().__init__(check, detail)
        self.error = error
        self.__cause__ = error
