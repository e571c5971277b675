"""The `tinymemory` command line (`tinymemory = tinymemory_ingest.cli:app`): thin commands over `worker.control`,
the job functions and the runtimes."""

from tinymemory_ingest.cli.main import app

__all__ = ["app"]
