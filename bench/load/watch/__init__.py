"""Watching a level while it runs: the 10 ms ticker (hang watchdog, server probe, loop lag,
progress: `ticker`), the client's health over the measured phase (`health`) and the
rate-limited progress line a cell prints (`progress`)."""
