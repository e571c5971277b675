"""Embedded mode: the one-process runtime, its in-process dispatcher and erasures, and the text preparation pool."""

from worker.embedded.dispatch import InProcessDispatcher
from worker.embedded.erasures import InProcessErasures
from worker.embedded.runtime import EmbeddedRuntime
from worker.embedded.textpool import TextPool

__all__ = ["EmbeddedRuntime", "InProcessDispatcher", "InProcessErasures", "TextPool"]
