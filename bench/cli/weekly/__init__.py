"""`cellbench weekly`: the week's run, unattended, leaving the truth on a `weekly/<date>` branch.

1. frameworks: every framework that runs here is updated to its newest release, installed beside
   the old one (bench.setup.installs.updates; `--pinned` keeps the adapters' versions); before, after and
   how the newest was found go into the journal;
2. `pytest -m chat`, then `pytest -m agent`, one run id for both (`sessions`); a cell's failure
   never stops the run, and the pytest output is kept in `weekly_<date>.log` beside the journal;
3. each cell whose failures were transient is run once more (`after/retry`), and each fix attempt
   that did not make its cell pass is reverted (`after/revert`);
4. comparison.json, REPORT.md and plots are rebuilt, and the journal gets its notes;
5. the results are committed on `weekly/<date>` (never main), adapter and profile edits first,
   one commit each, and the branch is pushed when the checkout has a remote (`after/branch`).

The model and the machine's folder are chosen as a pytest session chooses them (`--model`, else
APPLEBENCH_MODEL; CELLBENCH_MACHINE, else APPLEBENCH_RESULTS_SUBDIR: bench.cli.choice) and said
first; `--dry-run` says what the run would do and does nothing. Before the sessions (`cells`),
the prior journals and `cellbench weekly skip` say which cells stay skipped, and a second fix
attempt, a second retry or a same-day re-run of an oom cell is refused. `start` settles what
comes before the first cell; `run` is the whole run, `args` its command line.
"""

from bench.cli.weekly.run import main

__all__ = ["main"]
