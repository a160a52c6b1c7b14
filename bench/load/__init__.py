"""The load generator: drives an OpenAI-compatible chat API at a fixed concurrency (closed loop) or
at a request rate (open loop) and records every request.

The entry point is here: `run_level(LevelConfig, prompts, warmup_prompts) -> LevelRun`. The
modules, in the order a level uses them:

- `runner`: `run_level`, the level's own event loop, CPU pinning, GC and interrupt guards;
- `closed_loop`: warm-up, the closed-loop slots and their schedule, and stopping early;
- `arrivals`: an open-loop level (`LevelConfig.open_loop`): its seeded arrival schedule, the
  dispatcher and the --max-concurrency cap, on the closed loop's machinery;
- `request`: one streaming HTTP request, into a record or a typed error (`ChatClient`: one per
  level, `exchange(flight, body)` per request);
- `http/`: the HTTP/1.1 client under it: asyncio protocols, httptools' C parser, each read
  parsed and stamped in the transport's receive callback, a connection per request or kept alive;
- `watch/`: watching the level as it runs: the 10 ms ticker (hang watchdog, server probe, loop
  lag, progress), the client's health over the measured phase, the progress line a cell prints;
- `bodies`: the request bodies; `interrupts`: interrupts that must end a level.
- `procs/`: a level on several client processes, each with its own loop (`run_level_procs`).

The data types (`LevelConfig`, `OpenLoop`, `LevelRun`, `ClientHealth`, `Progress`) live in
`bench.core.level_run`, where the metrics read them; they are re-exported here.
"""

from bench.core.level_run import ClientHealth, LevelConfig, LevelRun, OpenLoop, Progress
from bench.load.runner import EVENT_LOOP, run_level

__all__ = ["EVENT_LOOP", "ClientHealth", "LevelConfig", "LevelRun", "OpenLoop", "Progress", "run_level"]
