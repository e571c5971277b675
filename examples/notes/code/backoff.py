"""Exponential backoff with full jitter, as used for transient engine errors."""

import random


def delays(initial: float = 0.5, factor: float = 2.0, ceiling: float = 30.0, attempts: int = 5) -> list[float]:
    """The sleep before each retry: a random share of an exponentially growing bound."""
    return [random.uniform(0, min(ceiling, initial * factor**n)) for n in range(attempts)]
