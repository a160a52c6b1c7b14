"""A cell's levels: the servers it starts, each level it measures, and when it must stop.

A level is closed-loop (a concurrency) or open-loop (an `OpenLoop` schedule at a request rate,
`CellConfig.load.plan`); `--request-rate sweep` chooses its rates one level at a time (`sweep`).
Levels run on a fresh server each, or all on one (--share-server, --endpoint). With --rounds K
they run round-major (c=1, c=8, c=16, then all again), so a slow drift of the host spreads over
every level instead of landing on one, each (level, round) on its own server unless shared; the
result's levels combine each level's rounds (bench.core.rounds). The cell stops early, keeping
everything measured so far, when a server fails to start, is killed for memory or ends on its
own, when the cell's budget is spent, or when the load generator's hang watchdog ends a level
(both `capped`). A transient start failure (a port found held, or a server that dropped its
readiness connections and exited: bench.run.server) is retried once.

The plan of the levels (`plan`: which, in what order, how many requests each), the cell's
mutable run of them (`cell_run.CellRun`: servers started, levels measured, when to stop) and the
rate search (`sweep`).
"""
