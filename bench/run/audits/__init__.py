"""Audits a cell makes against its running server, beyond its measured levels (docs/metrics.md,
Audits): `cache`, the caching audit of --cache-audit. The audits of a level's own requests are
bench.core.metrics.audits, which also decides this one."""
