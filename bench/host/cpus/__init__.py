"""The CPUs: where the client and the servers run (placement), and how busy they were (usage)."""
