"""`ToolScope`: what the host fixes for every tool call, so the model never chooses whose memory it touches."""

from __future__ import annotations

from dataclasses import dataclass

from engines.contract import Namespace, Reach


@dataclass(frozen=True)
class ToolScope:
    """Where writes land (`place`), what reads see (`reach`; None is the root's subtree without
    sandboxes) and whether the write tools exist at all (`writes`).

    A host placing an agent's tools should give a reach that admits `place`, as `ToolScope.at` does;
    otherwise the agent could write what it cannot read back or forget.
    """

    place: Namespace = Namespace.ROOT
    reach: Reach | None = None
    writes: bool = True

    @classmethod
    def default(cls) -> ToolScope:
        """The root, no reach, writes allowed."""
        return cls()

    @classmethod
    def at(cls, place: Namespace) -> ToolScope:
        """Writes at `place`, reads of `place` and its ancestors (`Reach.of(place)`), writes allowed."""
        return cls(place=place, reach=Reach.of(place), writes=True)
