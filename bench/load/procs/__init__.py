"""A level on several client processes (`--client-procs N|auto`).

One process stamps every chunk of a level on one event loop; at tens of thousands of chunks a
second that loop runs late and its delay lands in the server's TTFT and ITL. Here the level's
slots and requests are split across worker processes, each with its own event loop, started on
one shared start time, and their raw records merged into one `LevelRun` exactly as a single
process would have recorded them:

- `plan`: how many processes a level gets (a fixed count, or `auto` from the level before it);
- `split`: each worker's slots, requests (under the level's own request numbers) and config;
- `pool`: `run_level_procs`, the parent: start, warm-up, one start time, probes, progress, stops;
- `worker`: a worker process's entry point;
- `merge`: the workers' records and health into the level's; `channel`: their messages.
"""

from bench.load.procs.plan import ProcPlan, ProcsChoice, plan_level, resolve
from bench.load.procs.pool import WorkerError, run_level_procs

__all__ = ["ProcPlan", "ProcsChoice", "WorkerError", "plan_level", "resolve", "run_level_procs"]
