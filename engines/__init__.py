"""The memory library: the contract, the conformance suite, the engines and the shared chunker."""
