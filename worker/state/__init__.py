"""The state store protocol (`state.base`) and its two implementations: `state.sqlite` for embedded mode,
`state.redis` for the distributed pipeline (imported by module, so embedded mode never imports Redis).
Each keeps a layout version and migrates state an older release wrote (`state.sqlite_layout`,
`state.redis_layout`)."""

from worker.state.base import STATE_LAYOUT, StateStore, UnitState

__all__ = ["STATE_LAYOUT", "StateStore", "UnitState"]
