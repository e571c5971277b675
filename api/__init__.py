"""The HTTP read surface over the memory engine."""
