"""Every cellbench option: registered here once, checked once, resolved once.

The benchmark cells (bench/plugins/cells.py, fixtures/cells.py) and the eval rows
(bench/plugins/eval.py) share options (`--model`, `--results-dir`, `--port`, `--install`,
`--host-lock-timeout`, the run id), so both read them from this module: `pytest_configure`
turns the options into a `Settings` on `config.stash[SETTINGS]`, and `results_root` is the one
place `--results-dir` is resolved. Bad values are usage errors before any server starts, not one
failed test per cell later.

pytest decides the rootdir and ini file from the command line's test paths before any installed
plugin has added its options (pytest issue #8846): in `pytest -m chat --results-dir /tmp/x` it
takes `/tmp/x` for a test path, settles on it as the rootdir with no ini file, and pytest.ini's
testpaths, markers, addopts and timeout method are lost (`--results-dir=/tmp/x`, one token, is
unaffected). `pytest_load_initial_conftests`, the first hook after the command line is parsed
again with the installed plugins' options and before conftests are loaded or test paths decided,
makes that decision again (`redecide_rootdir`) and applies it as pytest itself would have: the
ini's values and its `addopts` (with any `-p` in them) and the conftest cut-off directory. An
explicit `-c`/`--rootdir` is left alone.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from _pytest.config.findpaths import determine_setup, parse_override_ini

from bench.base import paths
from bench.core.result import new_run_id
from bench.eval import gpus
from bench.host import affinity, memlimit
from bench.host.machine import detect
from bench.load import procs
from bench.load.progress import DEFAULT_INTERVAL_S
from bench.plugins.hooks import register_stashed, unregister_stashed
from bench.run.config import (
    DEFAULT_CELL_BUDGET_S,
    LOAD_OPTIONS,
    SPLITS,
    LoadPlan,
    cell_budgets,
    concurrency_levels,
    hang_seconds,
    load_plan,
)
from bench.setup import profiles
from bench.setup.prompts import PromptFileError, load_prompts


@dataclass(frozen=True)
class Settings:
    """The options whose values are parsed or looked up, as this session uses them."""

    run_id: str  # shared by every cell of the session, xdist workers included
    levels: tuple[int, ...]
    load: LoadPlan | None  # --request-rate and --slo; None: closed-loop levels, as always
    profile: profiles.ModelProfile
    endpoint: str | None
    hang_s: dict[str, float]  # split -> seconds without progress that cancel a level
    cell_budget_s: dict[str, float]  # split -> a cell's wall-clock budget: --cell-budget, else the seed's
    cell_budget_given: frozenset[str]  # the splits --cell-budget named (the others have the default)
    memory_limit_bytes: int | None
    cpus: affinity.Placement
    gpu_pool: tuple[int, ...] | None  # None: every GPU of this machine
    client_procs: procs.ProcsChoice = procs.ProcsChoice()  # --client-procs, with the CPUs free for the client
    pinned: bool = False  # --pinned: the adapters' versions, not the recorded updates
    api_key: profiles.ApiKey | None = None  # --api-key, else OPENAI_API_KEY, else the profile's api_key_env


SETTINGS = pytest.StashKey[Settings]()
XDIST_HOOKS = pytest.StashKey[object]()
RUN_ID_KEY = "cellbench_run_id"  # in xdist's workerinput


def settings(config: pytest.Config) -> Settings:
    return config.stash[SETTINGS]


def results_root(config: pytest.Config) -> Path:
    """--results-dir (relative to where pytest was invoked), else <rootdir>/results; absolute
    (bench.base.paths.results_root, the rule the `cellbench` commands follow too)."""
    return paths.results_root(config.getoption("results_dir"), config.invocation_params.dir, config.rootpath)


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("cellbench", "cellbench benchmark cells")
    g.addoption("--model", default="tiny", help="model profile name (models/<name>.yaml) or a profile path [tiny]")
    g.addoption("--concurrency", default=None, help="closed-loop concurrency levels [1,8,16]")
    g.addoption("--request-rate", default=None, metavar="R[,R2..]|sweep[:START]",
                help="open-loop levels instead: requests/s each (inf: all at once) on a seeded Poisson schedule; "
                     "sweep: the highest rate meeting --slo [none: closed loop]")
    g.addoption("--burstiness", type=float, default=None, help="open loop: gamma shape of inter-arrival times [1]")
    g.addoption("--max-concurrency", type=int, default=None, help="open loop: cap on requests in flight [none]")
    g.addoption("--arrival-seed", type=int, default=None, help="open loop: seed of the schedules [0]")
    g.addoption("--slo", default=None, metavar="ttft_p99=500ms,...", help="SLOs each level's goodput is judged by")
    g.addoption("--sweep-levels", type=int, default=None, help="--request-rate sweep: at most this many levels [8]")
    g.addoption("--sweep-tolerance", type=float, default=None, help="--request-rate sweep: relative precision [0.1]")
    g.addoption("--requests", type=int, default=100, help="measured requests per level [100]")
    g.addoption("--warmup", type=int, default=3, help="warm-up requests per level, not measured [3]")
    g.addoption("--results-dir", type=Path, default=None, help="results root [<rootdir>/results]")
    g.addoption("--run-id", default=None, help="run id shared by every cell of this session [UTC timestamp]")
    g.addoption("--share-server", action="store_true", help="one server for all levels (default: one per level)")
    g.addoption("--port", type=int, default=None, help="server port (0: any free port) [the adapter's port]")
    g.addoption("--install", action="store_true", help="install a missing framework instead of skipping its cells")
    g.addoption("--pinned", action="store_true",
                help="serve each framework at its adapter's pinned version, not the newer one `cellbench update` "
                     "installed and recorded")
    g.addoption("--request-timeout", type=float, default=300.0, help="per-request timeout, seconds [300]")
    g.addoption("--ready-timeout", type=float, default=None, metavar="SECONDS",
                help="how long a server (started or --endpoint) may take to answer its ready path "
                     "[the adapter's startup timeout]")
    g.addoption("--ignore-eos", action="store_true", help="send ignore_eos where the framework accepts it")
    g.addoption("--tools-param", action="store_true", help="send agent tools in the request's `tools` parameter")
    g.addoption("--prompts", type=Path, default=None, help="a prompt file to use instead of the shipped split")
    g.addoption("--degraded-threshold", type=float, default=0.2, help="failure share that makes a cell degraded")
    g.addoption("--strict-verdicts", action="store_true", help="degraded and capped cells fail the run")
    g.addoption("--host-lock-timeout", type=float, default=3600.0,
                help="seconds to wait for another cell's host lock; then the cell is failed, naming the holder [3600]")
    g.addoption("--api-key", default=None, metavar="KEY",
                help="send Authorization: Bearer KEY to every server, and give it to servers whose command "
                     "names {api_key} [$OPENAI_API_KEY, else the variable the profile's api_key_env names]")
    g.addoption("--endpoint", default=None,
                help="benchmark this already-running server (e.g. http://127.0.0.1:8080) with the generic "
                     "openai adapter; only its cells run, nothing is started or stopped")
    g.addoption("--progress-interval", type=float, default=DEFAULT_INTERVAL_S,
                help="seconds between a cell's progress lines during a level; none for shorter levels, "
                     f"0 turns them off [{DEFAULT_INTERVAL_S:g}]")
    g.addoption("--cell-budget", default=None, metavar="S|chat=45m,agent=90m",
                help="wall-clock budget per cell, one for every split or one per split (s, m or h; a bare number "
                     "is seconds): at the deadline the level stops, finished and partial levels are kept and the "
                     "cell ends capped [chat=45m,agent=90m; less when pytest's --timeout minus a margin is less]")
    g.addoption("--hang-minutes", default="chat=30,agent=45", metavar="chat=30,agent=45",
                help="no output and no finished request for this long cancels the level: capped, 'no progress' "
                     "[chat=30,agent=45]")
    g.addoption("--memory-limit", default=None, metavar="SIZE",
                help="run each server in a memory cgroup of SIZE (e.g. 8G) to emulate a smaller machine")
    g.addoption("--client-cpus", default="auto", metavar="LIST|auto|off",
                help="run each level's client (this pytest process) on these CPUs, e.g. 1 or 2-3 (Linux only) "
                     "[auto: the last CPU on a host with 4 or more CPUs and no GPU, else off]")
    g.addoption("--server-cpus", default="auto", metavar="LIST|auto|off",
                help="start each server, and everything it starts, on these CPUs, e.g. 0 or 0-2 (Linux only) "
                     "[auto: the CPUs --client-cpus leaves]")
    g.addoption("--client-procs", default="auto", help="client processes per level: N, or auto [auto]")
    g.addoption("--unique-prompts", action="store_true",
                help="open every request's first message with its own nonce, so no request can be served "
                     "from a cache another one filled: cold numbers")
    g.addoption("--keep-alive", action="store_true", help="reuse connections across a level's requests while the "
                "server keeps them open (README: keep-alive) [off: one connection per request]")
    g.addoption("--no-keep-alive", action="store_false", dest="keep_alive", help="one connection per request [default]")
    g.addoption("--skip-existing", type=float, nargs="?", const=0.0, default=None, metavar="HOURS",
                help="keep, not re-measure, a cell's non-failed result of this machine in this run (--run-id), or "
                     "newer than HOURS: the cell reports that result's verdict, annotated resumed")

    e = parser.getgroup("cellbench-eval", "cellbench eval rows (pytest -m eval)")
    e.addoption("--eval-config", type=Path, default=None, help="eval config [models/<model>/eval.yaml]")
    e.addoption("--smoke", type=int, default=None, metavar="N", help="at most N samples per row; no table edits")
    e.addoption("--rounds", type=int, default=1, metavar="K", help="rounds per row; run-state keeps all [1]")
    e.addoption("--table-from", choices=("round1", "mean"), default="round1",
                help="what the table gets when --rounds > 1: round 1, or the mean of the rounds [round1]")
    e.addoption("--exclude-ids", default="", metavar="S1,S2", help="skip rows whose id contains any substring")
    e.addoption("--retry-failed-from", type=Path, default=None, metavar="RUN_DIR",
                help="run only the rows whose table edit did not land in that earlier run")
    e.addoption("--gpu-pool", default=None, metavar="0,1", help="GPUs rows may lease (one lock per GPU) [all]")
    e.addoption("--no-table-update", action="store_true", help="run rows, edit no table")
    e.addoption("--commit", action="store_true", help="commit the edited benchmark files (never pushes)")
    e.addoption("--hardware", default=None, help="the hardware tag in Source cells [detected, e.g. H200]")
    e.addoption("--eval-root", type=Path, default=None, metavar="DIR",
                help="where the config's `file` paths, {repo_root} and the clients' cwd are "
                     "[the git top level of the config's folder]")
    e.addoption("--venv-python", default=None, metavar="PYTHON",
                help="the clients' (and sglang-omni's) Python [$EVAL_VENV_PYTHON, else the config's "
                     "default_venv_python, else cellbench's own]")
    e.addoption("--benchmarks", default="all", metavar="NAME,...",
                help="rows of these benchmark files only: arith for benchmark_arith.py [all]")
    e.addoption("--no-precheck", action="store_true", help="start the rows even when the eval precheck fails")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    redecide_rootdir(early_config, parser, args)


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    run_id = (workerinput or {}).get(RUN_ID_KEY) or config.getoption("run_id") or new_run_id()
    _check_numbers(config)
    profile = _profile(config.getoption("model"))
    config.stash[SETTINGS] = Settings(
        run_id=run_id,
        levels=_levels(config.getoption("concurrency") or "1,8,16"),
        load=_load(config),
        endpoint=_endpoint(config.getoption("endpoint")),
        hang_s=_per_split(hang_seconds, config.getoption("hang_minutes")),
        cell_budget_s={**DEFAULT_CELL_BUDGET_S, **_per_split(cell_budgets, config.getoption("cell_budget"))},
        cell_budget_given=frozenset(_per_split(cell_budgets, config.getoption("cell_budget"))),
        memory_limit_bytes=_memory_limit(config.getoption("memory_limit")),
        cpus=_cpus(config),
        client_procs=_client_procs(config),
        gpu_pool=_gpu_pool(config.getoption("gpu_pool")),
        profile=profile,
        pinned=config.getoption("pinned"),
        api_key=_api_key(config, profile),
    )
    _check_prompts(config)
    if config.pluginmanager.hasplugin("xdist"):
        register_stashed(config, XDIST_HOOKS, _XdistRunId(), "cellbench-xdist-run-id")


def pytest_unconfigure(config: pytest.Config) -> None:
    unregister_stashed(config, XDIST_HOOKS)


class _XdistRunId:
    """Every worker gets the controller's run id, so one session writes one run."""

    def pytest_configure_node(self, node) -> None:
        node.workerinput[RUN_ID_KEY] = node.config.stash[SETTINGS].run_id


# ------------------------------------------------------------------ checks (each a usage error)

# option -> (what it takes, the test its value must pass)
_NUMBERS = {
    "requests": ("a count of measured requests per level, 1 or more", lambda v: v >= 1),
    "warmup": ("a count of warm-up requests per level, 0 or more", lambda v: v >= 0),
    "request_timeout": ("seconds, more than 0", lambda v: v > 0),
    "ready_timeout": ("seconds, more than 0", lambda v: v > 0),
    "host_lock_timeout": ("seconds, 0 or more", lambda v: v >= 0),
    "progress_interval": ("seconds, 0 (no progress lines) or more", lambda v: v >= 0),
    "degraded_threshold": ("a failure share from 0 to 1", lambda v: 0 <= v <= 1),
    "port": ("a port number from 0 (any free port) to 65535", lambda v: 0 <= v <= 65535),
    "skip_existing": ("hours, 0 or more", lambda v: v >= 0),
    "smoke": ("a sample count >= 1", lambda v: v >= 1),
    "rounds": ("a count >= 1", lambda v: v >= 1),
}


def _check_numbers(config: pytest.Config) -> None:
    for dest, (takes, valid) in _NUMBERS.items():
        value = config.getoption(dest, None)
        if value is not None and not valid(value):
            raise pytest.UsageError(f"--{dest.replace('_', '-')} takes {takes}, got {value:g}")


def _levels(text: str) -> tuple[int, ...]:
    try:
        return concurrency_levels(text)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def _load(config: pytest.Config) -> LoadPlan | None:
    """--request-rate, its companions and --slo (bench.run.config.load_plan)."""
    try:
        return load_plan(**{name: config.getoption(name) for name in LOAD_OPTIONS})
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def _endpoint(text: str | None) -> str | None:
    """`http://127.0.0.1:8080` (a trailing `/` or `/v1` dropped: requests add `/v1/...` themselves)."""
    if text is None:
        return None
    url = text.rstrip("/").removesuffix("/v1")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme not in ("http", "https") or not parts.hostname or port is None or parts.path:
        raise pytest.UsageError(f"--endpoint takes a server's base URL such as http://127.0.0.1:8080, got {text!r}")
    return url


def _per_split(parse: Callable[[str], dict[str, float]], text: str | None) -> dict[str, float]:
    """--hang-minutes or --cell-budget, per split (bench.run.config.hang_seconds, cell_budgets)."""
    try:
        return {} if text is None else parse(text)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def _api_key(config: pytest.Config, profile: profiles.ModelProfile) -> profiles.ApiKey | None:
    try:
        key = profiles.api_key(config.getoption("api_key"), os.environ, profile)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if key is None and profile.openai and profile.openai.takes_api_key and config.getoption("endpoint") is None:
        raise pytest.UsageError(f"--model {profile.source}: its openai.command gives the server {{api_key}}, and no "
                                "API key was given: pass --api-key KEY or set OPENAI_API_KEY")
    return key


def _memory_limit(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return memlimit.parse_size(text)
    except ValueError as exc:
        raise pytest.UsageError(f"--memory-limit: {exc}") from None


def _cpus(config: pytest.Config) -> affinity.Placement:
    """--client-cpus / --server-cpus resolved for this host (bench.host.affinity.resolve)."""
    client, server = config.getoption("client_cpus"), config.getoption("server_cpus")
    try:
        return affinity.resolve(client, server, endpoint=config.getoption("endpoint") is not None,
                                gpu=client == server == "auto" and bool(detect().gpus))
    except affinity.AffinityError as exc:
        raise pytest.UsageError(str(exc)) from None


def _client_procs(config: pytest.Config) -> procs.ProcsChoice:
    try:  # the placement's errors are _cpus's to report
        return procs.resolve(config.getoption("client_procs"), _cpus(config))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def _gpu_pool(text: str | None) -> tuple[int, ...] | None:
    try:
        return None if text is None else gpus.parse_pool(text)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def _profile(model: str) -> profiles.ModelProfile:
    try:
        return profiles.load_profile(model)
    except profiles.ProfileError as exc:
        raise pytest.UsageError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:  # a profile file that exists but cannot be read
        raise pytest.UsageError(f"--model {model}: cannot read: {exc}") from None


def _check_prompts(config: pytest.Config) -> None:
    """--prompts, read once for each split as that split's cells read it (bench.run.cell._prompts)."""
    path = config.getoption("prompts")
    if path is None:
        return
    for split in SPLITS:
        try:
            load_prompts(path, split_hint=split, tools_param=config.getoption("tools_param"))
        except PromptFileError as exc:
            raise pytest.UsageError(f"--prompts: {exc}") from None


# ------------------------------------------------------------------ the rootdir, decided again


def redecide_rootdir(config: pytest.Config, parser: pytest.Parser, args: list[str]) -> bool:
    """Re-decide the rootdir and ini file from the test paths in `args` (which it may extend with
    the ini's addopts); True when the decision changed."""
    known = config.known_args_namespace
    if known.inifilename or known.rootdir:
        return False
    rootpath, inipath, inicfg, ignored = determine_setup(
        inifile=None,
        override_ini=known.override_ini,
        args=known.file_or_dir,
        rootdir_cmd_arg=None,
        invocation_dir=config.invocation_params.dir,
    )
    if (rootpath, inipath) == (config.rootpath, config.inipath):
        return False
    # pytest keeps the decision in these attributes; there is no public way to set it (pytest < 9.2).
    config._rootpath, config._inipath, config._inicfg = rootpath, inipath, inicfg
    config._ignored_config_files = ignored
    config._inicache.clear()
    parser.extra_info.update(rootdir=str(rootpath), inifile=str(inipath))
    addopts = config.getini("addopts")
    args[:] = [*addopts, *args]
    config.pluginmanager.consider_preparse(addopts, exclude_only=False)
    config.known_args_namespace = parser.parse_known_args(args, namespace=copy.copy(config.option))
    config._inicfg.update(parse_override_ini(config.known_args_namespace.override_ini))  # -o in addopts
    config._inicache.clear()
    if config.known_args_namespace.confcutdir is None:
        config.known_args_namespace.confcutdir = str(inipath.parent if inipath else rootpath)
    return True
