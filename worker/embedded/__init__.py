"""Embedded mode: the one-process runtime, its in-process dispatcher, and the text preparation pool."""

from worker.embedded.dispatch import InProcessDispatcher
from worker.embedded.runtime import EmbeddedRuntime
from worker.embedded.textpool import TextPool

__all__ = ["EmbeddedRuntime", "InProcessDispatcher", "TextPool"]
