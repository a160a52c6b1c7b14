"""`EvalSettings`: the eval rows' options (`pytest -m eval`), each declared once as its field.

The rows share `--model`, `--results-dir`, `--port`, `--install`, `--pinned`, `--rounds` and
`--host-lock-timeout` with the cells; those are `Settings`' own fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.plugins.opts import parsers
from bench.plugins.opts.spec import Option, option

GROUP = ("cellbench-eval", "cellbench eval rows (pytest -m eval)")  # pytest's option group: name, description


@dataclass(frozen=True, kw_only=True)
class EvalSettings:
    eval_config: Path | None = option("--eval-config", "eval config", type=Path, shown="models/<model>/eval.yaml")
    smoke: int | None = option("--smoke", "at most N samples per row; no table edits", type=int, metavar="N",
                               shown="every sample", takes="a sample count >= 1", valid=lambda v: v >= 1)
    table_from: str = option("--table-from", "what the table gets when --rounds > 1: round 1, or the mean of the "
                             "rounds", choices=("round1", "mean"), default="round1")
    exclude_ids: str = option("--exclude-ids", "skip rows whose id contains any substring", default="",
                              metavar="S1,S2", shown="none")
    retry_failed_from: Path | None = option(
        "--retry-failed-from", "run only the rows whose table edit did not land in that earlier run", type=Path,
        metavar="RUN_DIR", shown="none")
    gpu_pool: tuple[int, ...] | None = option("--gpu-pool", "GPUs rows may lease (one lock per GPU)",
                                              metavar="0,1", shown="all", parse=parsers.gpu_pool)
    no_table_update: bool = option("--no-table-update", "run rows, edit no table", action="store_true")
    commit: bool = option(
        "--no-commit", "leave the edited benchmark files uncommitted", action="store_false", dest="commit",
        shown="off: one local commit of the edited files, never pushed",
        also=(Option("--commit", "commit the edited benchmark files, never pushing: the default, kept for old "
                     "command lines", action="store_true", dest="commit", shown="default"),))
    hardware: str | None = option("--hardware", "the hardware tag in Source cells", shown="detected, e.g. H200")
    eval_root: Path | None = option(
        "--eval-root", "where the config's `file` paths, {repo_root} and the clients' cwd are", type=Path,
        metavar="DIR", shown="the git top level of the config's folder")
    venv_python: str | None = option(
        "--venv-python", "the clients' (and sglang-omni's) Python", metavar="PYTHON",
        shown="$EVAL_VENV_PYTHON, else the config's default_venv_python, else cellbench's own")
    benchmarks: str = option("--benchmarks", "rows of these benchmark files only: arith for benchmark_arith.py, "
                             "mmsu for benchmark_omni_mmsu.py; `help` lists the names", default="all",
                             metavar="NAME,...", brief="rows of these benchmark files only; `help` lists the names")
    no_precheck: bool = option("--no-precheck", "start the rows even when the eval precheck fails",
                               action="store_true")
