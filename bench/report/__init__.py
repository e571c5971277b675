"""`make bench`: every benchmark of bench/ run end to end, and one report with charts (`python -m bench.report`)."""
