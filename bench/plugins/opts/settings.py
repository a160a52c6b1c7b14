"""`Settings`: the session's options, each declared here once as the field that holds its value.

The fields up to `skip_existing_s` are the cell options, in `pytest --help`'s order, each with
its flag, parser, default, check and help (bench.plugins.opts.spec). Those after it are resolved
from several options, the environment or the host (bench.plugins.opts.build), and `eval` holds
the eval rows' options. A consumer reads `settings(config).<field>` (bench.plugins.options).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.base.defaults import (
    DEFAULT_DEGRADED_FRACTION,
    DEFAULT_MODEL,
    DEFAULT_REQUEST_TIMEOUT_S,
    DEFAULT_REQUESTS,
    DEFAULT_WARMUP,
    levels_text,
)
from bench.host.cpus import placement
from bench.load import procs
from bench.load.watch.progress import DEFAULT_INTERVAL_S
from bench.plugins.opts import parsers
from bench.plugins.opts.eval_settings import EvalSettings
from bench.plugins.opts.spec import Option, option
from bench.run.config import DEFAULT_CELL_BUDGET_S, LoadPlan
from bench.run.levels.sweep import SweepPlan
from bench.setup import profiles

GROUP = ("cellbench", "cellbench benchmark cells")  # pytest's option group: name, description
_BUDGETS = ",".join(f"{split}={seconds / 60:g}m" for split, seconds in DEFAULT_CELL_BUDGET_S.items())


@dataclass(frozen=True)
class PytestOptions:
    """The options of pytest and its plugins that cellbench reads, read where cellbench's are."""

    keyword: str  # -k
    markexpr: str  # -m
    collect_only: bool
    htmlpath: str | None  # pytest-html's --html; None without it or the plugin
    timeout: float | None  # pytest-timeout's --timeout as given; None without it or the plugin


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The options whose values are parsed or looked up, as this session uses them."""

    model: str = option("--model", "model profile name (models/<name>.yaml) or a profile path",
                        shown=f"$APPLEBENCH_MODEL, else {DEFAULT_MODEL}")
    levels: tuple[int, ...] = option("--concurrency", "closed-loop concurrency levels", shown=levels_text(),
                                     parse=parsers.levels)
    request_rate: str | None = option(
        "--request-rate", "open-loop levels instead: requests/s each (inf: all at once) on a seeded Poisson "
        "schedule; sweep: the highest rate meeting --slo", shown="none: closed loop",
        metavar="R[,R2..]|sweep[:START]", brief="open-loop levels: requests/s each (inf: all at once), or sweep")
    burstiness: float | None = option("--burstiness", "open loop: gamma shape of inter-arrival times", type=float,
                                      shown=f"{LoadPlan.burstiness:g}")
    max_concurrency: int | None = option("--max-concurrency", "open loop: cap on requests in flight", type=int,
                                         shown="none")
    arrival_seed: int | None = option("--arrival-seed", "open loop: seed of the schedules", type=int,
                                      shown=str(LoadPlan.seed))
    slo: str | None = option("--slo", "SLOs each level's goodput is judged by", metavar="ttft_p99=500ms,...",
                             shown="none")
    sweep_levels: int | None = option("--sweep-levels", "--request-rate sweep: at most this many levels", type=int,
                                      shown=str(SweepPlan.max_levels))
    sweep_tolerance: float | None = option("--sweep-tolerance", "--request-rate sweep: relative precision",
                                           type=float, shown=f"{SweepPlan.tolerance:g}")
    trace_file: str | None = option(
        "--trace-file", "one open-loop level replaying a request trace (mooncake JSONL or BurstGPT CSV): its "
        "arrival times, input and output lengths, prompts made to the input lengths with the model's tokenizer "
        "(pytest's own --trace starts pdb)", metavar="PATH", shown="none",
        brief="an open-loop level replaying a request trace (mooncake, BurstGPT)")
    ramp_up: str | None = option(
        "--ramp-up", "open loop: the arrival rate rises to each level's rate over its requests", shown="none: flat",
        metavar="linear|exponential", choices=("linear", "exponential"))
    ramp_up_start: float | None = option("--ramp-up-start", "--ramp-up: the rate it starts from, requests/s",
                                         type=float, metavar="R0", shown="a tenth of each level's rate")
    duration: str | None = option(
        "--duration", "bound each level's measured phase in time as --requests bounds it in count: no request is "
        "sent after it, those in flight finish; whichever comes first ends the level", metavar="90|90s|5m|1.5h",
        shown="none", brief="bound each level's measured phase in time (whichever of it and --requests is first)")
    requests: int = option("--requests", "measured requests per level", type=int, default=DEFAULT_REQUESTS,
                           takes="a count of measured requests per level, 1 or more", valid=lambda v: v >= 1)
    warmup: int = option("--warmup", "warm-up requests per level, not measured", type=int, default=DEFAULT_WARMUP,
                         takes="a count of warm-up requests per level, 0 or more", valid=lambda v: v >= 0)
    rounds: int = option(
        "--rounds", "rounds per cell level or eval row: a cell runs all its levels K times, round after round, each "
        "on a fresh server unless shared, and reports the median with an interval from the rounds; an eval row's "
        "run-state keeps every round", type=int, default=1, metavar="K", takes="a count >= 1",
        valid=lambda v: v >= 1, brief="rounds per cell level or eval row (median and interval from the rounds)")
    results_dir: Path | None = option("--results-dir", "results root", type=Path, shown="<rootdir>/results")
    run_id: str = option("--run-id", "run id shared by every cell of this session", shown="UTC timestamp")
    share_server: bool = option("--share-server", "one server for all levels", action="store_true",
                                note=": one per level")
    port: int | None = option("--port", "server port (0: any free port)", type=int, shown="the adapter's port",
                              takes="a port number from 0 (any free port) to 65535", valid=lambda v: 0 <= v <= 65535)
    install: bool = option("--install", "install a missing framework instead of skipping its cells",
                           action="store_true")
    pinned: bool = option("--pinned", "serve each framework at its adapter's pinned version, not the newer one "
                          "`cellbench update` installed and recorded", action="store_true",
                          brief="the adapters' pinned versions, not the ones `cellbench update` recorded")
    request_timeout_s: float = option("--request-timeout", "per-request timeout, seconds", type=float,
                                      default=DEFAULT_REQUEST_TIMEOUT_S, takes="seconds, more than 0",
                                      valid=lambda v: v > 0)
    ready_timeout_s: float | None = option(
        "--ready-timeout", "how long a server (started or --endpoint) may take to answer its ready path",
        type=float, metavar="SECONDS", shown="the adapter's startup timeout", takes="seconds, more than 0",
        valid=lambda v: v > 0)
    ignore_eos: bool = option("--ignore-eos", "send ignore_eos where the framework accepts it", action="store_true")
    tools_param: bool = option("--tools-param", "send agent tools in the request's `tools` parameter",
                               action="store_true")
    prompt_files: dict[str, Path] = option(
        "--prompts", "a prompt file instead of the shipped splits: one for every split, or one per split it names "
        "(a split it leaves out keeps its shipped file)", metavar="PATH|chat=PATH,agent=PATH",
        shown="the shipped prompts/<split>.json", parse=parsers.prompt_files,
        brief="a prompt file instead of the shipped splits: one for all, or one per split")
    degraded_fraction: float = option("--degraded-threshold", "failure share that makes a cell degraded",
                                      type=float, default=DEFAULT_DEGRADED_FRACTION,
                                      takes="a failure share from 0 to 1", valid=lambda v: 0 <= v <= 1)
    strict_verdicts: bool = option("--strict-verdicts", "degraded and capped cells fail the run", action="store_true")
    host_lock_timeout_s: float = option(
        "--host-lock-timeout", "seconds to wait for another cell's host lock; then the cell is failed, naming "
        "the holder", type=float, default=3600.0, takes="seconds, 0 or more", valid=lambda v: v >= 0)
    api_key_given: str | None = option(
        "--api-key", "send Authorization: Bearer KEY to every server, and give it to servers whose command "
        "names {api_key}", metavar="KEY", shown="$OPENAI_API_KEY, else the variable the profile's api_key_env names",
        brief="the servers' API key, sent as Authorization: Bearer KEY")
    endpoint: str | None = option(
        "--endpoint", "benchmark this already-running server (e.g. http://127.0.0.1:8080) with the generic "
        "openai adapter; only its cells run, nothing is started or stopped", shown="none", parse=parsers.endpoint,
        brief="benchmark this running server (its base URL); nothing is started")
    progress_interval_s: float = option(
        "--progress-interval", "seconds between a cell's progress lines during a level; none for shorter levels, "
        "0 turns them off", type=float, default=DEFAULT_INTERVAL_S, takes="seconds, 0 (no progress lines) or more",
        valid=lambda v: v >= 0, brief="seconds between a cell's progress lines (0: none)")
    cell_budget_given: dict[str, float] = option(
        "--cell-budget", "wall-clock budget per cell, one for every split or one per split (s, m or h; a bare "
        "number is seconds): at the deadline the level stops, finished and partial levels are kept and the "
        "cell ends capped", metavar="S|chat=45m,agent=90m", shown=_BUDGETS,
        note="; less when pytest's --timeout minus a margin is less", parse=parsers.cell_budget,
        brief="a cell's wall-clock budget, for every split or per split; then it ends capped")
    hang_s: dict[str, float] = option(
        "--hang-minutes", "no output and no finished request for this long cancels the level: capped, "
        "'no progress'", default="chat=30,agent=45", metavar="chat=30,agent=45", parse=parsers.hang,
        brief="minutes without progress that cancel a level (capped)")
    memory_limit_bytes: int | None = option(
        "--memory-limit", "run each server in a memory cgroup of SIZE (e.g. 8G) to emulate a smaller machine",
        metavar="SIZE", shown="none", parse=parsers.memory_limit)
    client_cpus: str = option(
        "--client-cpus", "run each level's client (this pytest process) on these CPUs, e.g. 1 or 2-3 (Linux only)",
        default="auto", metavar="LIST|auto|off",
        note=": the last CPU on a host with 4 or more CPUs and no GPU, else off",
        brief="the CPUs of each level's client (Linux)")
    server_cpus: str = option(
        "--server-cpus", "start each server, and everything it starts, on these CPUs, e.g. 0 or 0-2 (Linux only)",
        default="auto", metavar="LIST|auto|off", note=": the CPUs --client-cpus leaves",
        brief="the CPUs of each server and its children (Linux)")
    client_procs_given: str = option("--client-procs", "client processes per level: N, or auto", default="auto")
    unique_prompts: bool = option(
        "--unique-prompts", "open every request's first message with its own nonce, so no request can be served "
        "from a cache another one filled: cold numbers", action="store_true",
        brief="a nonce opens every request: nothing served from a cache")
    cache_audit: bool = option(
        "--cache-audit", "after a cell's last level, on its server, send 8 prompts with fresh nonces and then the "
        "same 8 again at concurrency 1, and annotate the cell `cached` when the repeats' TTFT is at least a "
        "tenth lower, by the upper end of its 95 percent interval (docs/metrics.md, Audits)", action="store_true",
        brief="an audit round: repeated prompts against their first TTFT")
    keep_alive: bool = option(
        "--keep-alive", "reuse connections across a level's requests while the server keeps them open "
        "(docs/client-performance.md)", action="store_true", note=": one connection per request",
        brief="reuse connections across a level's requests",
        also=(Option("--no-keep-alive", "one connection per request", action="store_false", dest="keep_alive",
                     shown="default"),))
    scrape_interval_s: float | None = option(
        "--server-metrics", "scrape each started server's Prometheus /metrics as every level starts and ends and "
        "every SECONDS during it (on: every 2 s), where its adapter declares them, turning them on where a flag does "
        "(llama-server --metrics); off: neither", default="on", metavar="on|off|SECONDS", parse=parsers.scrape_interval,
        brief="scrape the servers' own metrics around and during each level (on: every 2 s)")
    skip_existing_s: float | None = option(
        "--skip-existing", "keep, not re-measure, a cell's non-failed result of this machine in this run (--run-id), "
        "or newer than HOURS: the cell reports that result's verdict, annotated resumed", type=float, nargs="?",
        const=0.0, metavar="HOURS", shown="off", takes="hours, 0 or more", valid=lambda v: v >= 0,
        parse=parsers.hours_to_s, brief="keep a cell's result of this run (or newer than HOURS), not re-measure it")

    # resolved from several options, the environment or the host (bench.plugins.opts.build)
    profile: profiles.ModelProfile  # --model, else APPLEBENCH_MODEL, else the default: loaded
    model_source: str  # which of those chose it (bench.setup.profiles.chosen_model)
    load: LoadPlan | None  # --request-rate and --slo; None: closed-loop levels, as always
    cell_budget_s: dict[str, float]  # split -> a cell's wall-clock budget: --cell-budget's, else the default
    cpus: placement.Placement  # --client-cpus and --server-cpus, for this host
    client_procs: procs.ProcsChoice  # --client-procs, with the CPUs free for the client
    api_key: profiles.ApiKey | None  # --api-key, else OPENAI_API_KEY, else the profile's api_key_env
    eval: EvalSettings  # the eval rows' options
    pytest: PytestOptions
