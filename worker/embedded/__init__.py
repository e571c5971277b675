"""Embedded mode: the one-process runtime, its in-process dispatcher and erasures, and the text preparation pool."""

from worker.embedded.dispatch import InProcessDispatcher
from worker.embedded.runtime import EmbeddedRuntime
from worker.embedded.textpool import TextPool
from worker.erasure.runner import InProcessErasures

__all__ = ["EmbeddedRuntime", "InProcessDispatcher", "InProcessErasures", "TextPool"]
