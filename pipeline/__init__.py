"""Pure ingestion stages: sniff, convert, scrub, chunk, assemble, batch. No Redis, no network."""
