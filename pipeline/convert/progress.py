"""Signs of life from a long conversion: a converter says when it finished a page it read by OCR.

A converter process's parent kills a conversion that goes quiet for longer than the time limit. Reading a
200-page scan takes longer than that in all, but each page is quick: so the worker tells its parent after each
page (`pipeline.convert.worker` installs the hook), and the limit then holds per page. In a process without a
hook (a conversion run in place) a page passes unremarked.
"""

from __future__ import annotations

from collections.abc import Callable

_hook: Callable[[], None] | None = None


def on_page(hook: Callable[[], None] | None) -> None:
    """Call `hook` after every page read from now on, in this process (None: stop)."""
    global _hook
    _hook = hook


def page_done() -> None:
    """A converter finished a page: let whoever watches this process know it is alive."""
    if _hook is not None:
        _hook()
