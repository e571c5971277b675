"""The front ends of tinymemory-ingest: the `tinymemory` command line (`cli`), the read API with its console
and MCP endpoint (`api`), and the CortexDB double for development (`cortex_double`).

This is the top layer: it may import every other package, and none of them imports it.
"""

import importlib.metadata

DISTRIBUTION = "tinymemory-ingest"
"""The distribution this package is installed from."""


def installed_version() -> str:
    """The installed distribution's version, or `unknown` when running from a tree that was never installed."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


__all__ = ["DISTRIBUTION", "installed_version"]
