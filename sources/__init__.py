"""Source readers: list units, detect changes against a manifest, read one unit."""
