"""What a running cell puts on disk as it goes, so that a killed session keeps what finished:
each level's request records, written and synced when the level ends (`sidecar`)."""
