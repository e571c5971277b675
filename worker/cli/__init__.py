"""The `tinymemory` command line (`tinymemory = worker.cli:app`): thin commands over `worker.control`,
the job functions and the runtimes."""

from worker.cli.app import app

__all__ = ["app"]
