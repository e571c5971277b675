"""The runtime: job functions, state stores, dispatchers and the `tinymemory` command line."""
