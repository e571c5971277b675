"""`python -m tinymemory_ingest.cortex_double --port N [--wire direct|hosted] [--data FILE]`: a CortexDB double."""

from tinymemory_ingest.cortex_double.server import main

main()
