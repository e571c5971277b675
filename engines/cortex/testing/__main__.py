"""`python -m engines.cortex.testing --port N [--wire direct|hosted] [--data FILE]`: a CortexDB double."""

from engines.cortex.testing.server import main

main()
