"""The reference engine: small, real and in memory; what the conformance suite and tests run against."""

from engines.reference.engine import ReferenceEngine

__all__ = ["ReferenceEngine"]
