"""The server's own view of a level: its Prometheus metrics, scraped while the level runs."""
