"""`Settings`: the session's options, parsed into the records that the cells take whole.

Each cell option is declared once, in `OPTIONS` (in `pytest --help`'s order), with its flag,
parser, default, check and help (bench.plugins.opts.spec) and `into`: the Settings field its value
lands in. `into="server.port"` is the `port` of `Settings.server`, a bench.run.config.ServerSettings;
a name without a dot is a field of `Settings` itself. A field is named after its flag, with the
unit of its value where that differs from the flag's (--hang-minutes: `budget.hang_s`, seconds;
--skip-existing HOURS: `budget.skip_existing_s`). The options that together make one value share
its field (`RESOLVED`: the open-loop ones `load.plan`, --client-cpus and --server-cpus
`client.cpus`); bench.plugins.opts.build resolves those, with the environment and the host, and
parses every other option straight into its record. `eval` holds the eval rows' options
(bench.plugins.opts.eval_settings). A consumer reads `settings(config).<record>.<field>`
(bench.plugins.options); a `cellbench` command that takes one of these options declares it
with `cell_option(flag).add_argument(parser)`, so its help and checks are these.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.base.defaults import (
    DEFAULT_DEGRADED_THRESHOLD,
    DEFAULT_MODEL,
    DEFAULT_REQUEST_TIMEOUT_S,
    DEFAULT_REQUESTS,
    DEFAULT_WARMUP,
    levels_text,
)
from bench.core.client_settings import ClientSettings
from bench.load.watch.progress import DEFAULT_INTERVAL_S
from bench.plugins.opts import parsers
from bench.plugins.opts.eval_settings import EvalSettings
from bench.plugins.opts.spec import Option
from bench.run.config import (
    DEFAULT_CELL_BUDGET_S,
    DEFAULT_HANG_S,
    BudgetSettings,
    LoadPlan,
    LoadSettings,
    ReportingSettings,
    ServerSettings,
)
from bench.run.levels.sweep import SweepPlan
from bench.setup import profiles

GROUP = ("cellbench", "cellbench benchmark cells")  # pytest's option group: name, description
_BUDGETS = ",".join(f"{split}={seconds / 60:g}m" for split, seconds in DEFAULT_CELL_BUDGET_S.items())
_HANG = ",".join(f"{split}={seconds / 60:g}" for split, seconds in DEFAULT_HANG_S.items())  # chat=30,agent=45
# The fields whose value several options (or one, with the environment or the host) make:
# bench.plugins.opts.build resolves each; `budget.cell_budget_s` fills `budget.cell_budget_named` too.
RESOLVED = ("load.plan", "load.sessions", "server.api_key", "client.cpus", "client.client_procs",
            "budget.cell_budget_s")


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
    """The session's options as its cells and eval rows take them: a record per concept."""

    model: str  # --model, else APPLEBENCH_MODEL, else the default (bench.setup.profiles.chosen_model)
    model_source: str  # which of those chose it
    profile: profiles.ModelProfile  # the model's profile, loaded
    results_dir: Path | None  # --results-dir as given (bench.plugins.options.results_root resolves it)
    run_id: str  # --run-id, else the xdist controller's, else a new one
    load: LoadSettings
    server: ServerSettings
    client: ClientSettings
    budget: BudgetSettings
    reporting: ReportingSettings
    eval: EvalSettings  # the eval rows' options
    pytest: PytestOptions

    # The options the eval rows share with the cells, where bench/plugins/eval.py reads them (that
    # module is being split apart; it is to read them from the records, and these then go).
    @property
    def rounds(self) -> int:
        return self.load.rounds

    @property
    def port(self) -> int | None:
        return self.server.port

    @property
    def install(self) -> bool:
        return self.server.install

    @property
    def pinned(self) -> bool:
        return self.server.pinned


OPTIONS: tuple[Option, ...] = (
    Option("--model", "model profile name (models/<name>.yaml) or a profile path",
           shown=f"$APPLEBENCH_MODEL, else {DEFAULT_MODEL}", into="model"),
    Option("--concurrency", "closed-loop concurrency levels, or sweep[:START]: the highest concurrency meeting --slo, "
           "searched from START (1)", shown=levels_text(), metavar="C[,C2..]|sweep[:START]", parse=parsers.levels,
           brief="closed-loop concurrency levels, or sweep", into="load.concurrency"),
    Option("--request-rate", "open-loop levels instead: requests/s each (inf: all at once) on a seeded Poisson "
           "schedule; sweep: the highest rate meeting --slo", shown="none: closed loop",
           metavar="R[,R2..]|sweep[:START]", brief="open-loop levels: requests/s each (inf: all at once), or sweep",
           into="load.plan"),
    Option("--burstiness", "open loop: gamma shape of inter-arrival times", type=float,
           shown=f"{LoadPlan.burstiness:g}", into="load.plan"),
    Option("--max-concurrency", "open loop: cap on requests in flight", type=int, shown="none", into="load.plan"),
    Option("--arrival-seed", "open loop: seed of the schedules", type=int, shown=str(LoadPlan.seed),
           into="load.plan"),
    Option("--slo", "SLOs each level's goodput is judged by", metavar="ttft_p99=500ms,...", shown="none",
           into="load.plan"),
    Option("--sweep-levels", "a sweep (--request-rate or --concurrency): at most this many levels", type=int,
           shown=str(SweepPlan.max_levels), into="load.plan"),
    Option("--sweep-tolerance", "a sweep (--request-rate or --concurrency): relative precision", type=float,
           shown=f"{SweepPlan.tolerance:g}", into="load.plan"),
    Option("--trace-file", "one open-loop level replaying a request trace (mooncake JSONL or BurstGPT CSV): its "
           "arrival times, input and output lengths, prompts made to the input lengths with the model's tokenizer "
           "(pytest's own --trace starts pdb)", metavar="PATH", shown="none",
           brief="an open-loop level replaying a request trace (mooncake, BurstGPT)", into="load.plan"),
    Option("--ramp-up", "open loop: the arrival rate rises to each level's rate over its requests", shown="none: flat",
           metavar="linear|exponential", choices=("linear", "exponential"), into="load.plan"),
    Option("--ramp-up-start", "--ramp-up: the rate it starts from, requests/s", type=float, metavar="R0",
           shown="a tenth of each level's rate", into="load.plan"),
    Option("--stop-over-saturated", "open loop: end a level once its queue is seen growing without bound (the "
           "server does not keep up with the offered rate), its figures kept and marked; a sweep's levels always do",
           action="store_true", brief="open loop: end a level whose queue grows without bound", into="load.plan"),
    Option("--duration", "bound each level's measured phase in time as --requests bounds it in count: no request is "
           "sent after it, those in flight finish; whichever comes first ends the level", metavar="90|90s|5m|1.5h",
           shown="none", brief="bound each level's measured phase in time (whichever of it and --requests is first)",
           into="load.plan"),
    Option("--sessions", "each closed-loop level runs N conversations of the prompts, --concurrency at a time: every "
           "turn carries the history so far with the server's own answers", type=int, metavar="N", shown="none",
           brief="conversations per level, each turn with the server's own answers", into="load.sessions"),
    Option("--sessions-file", "sessions from a file: its conversations (ShareGPT, JSONL, as --prompts reads), or "
           "recorded agent sessions as Weka KV-cache-tester traces (a file or a folder of them), each turn made to "
           "its recorded length and shared cache blocks with the model's tokenizer", metavar="PATH", shown="none",
           brief="sessions from a conversation file or Weka agent traces", into="load.sessions"),
    Option("--session-rate", "--sessions: start sessions at R per second (Poisson), at most --concurrency under way",
           type=float, metavar="R", shown="as slots free up", into="load.sessions"),
    Option("--session-turns", "--sessions: at most K turns per conversation", type=int, metavar="K",
           shown="every user turn", into="load.sessions"),
    Option("--think-time", "--sessions: the pause between a turn's answer and the next turn (exp:S: drawn, mean S)",
           metavar="S|exp:S", shown="0; a Weka trace's recorded pauses", into="load.sessions"),
    Option("--session-header", "--sessions: send this header naming the session with every turn (for routers that "
           "keep a session on one replica)", metavar="NAME", shown="none",
           brief="--sessions: a header naming the session on every turn", into="load.sessions"),
    Option("--requests", "measured requests per level", type=int, default=DEFAULT_REQUESTS,
           takes="a count of measured requests per level, 1 or more", valid=lambda v: v >= 1, into="load.requests"),
    Option("--warmup", "warm-up requests per level, not measured", type=int, default=DEFAULT_WARMUP,
           takes="a count of warm-up requests per level, 0 or more", valid=lambda v: v >= 0, into="load.warmup"),
    Option("--rounds", "rounds per cell level or eval row: a cell runs all its levels K times, round after round, each "
           "on a fresh server unless shared, and reports the median with an interval from the rounds; an eval row's "
           "run-state keeps every round", type=int, default=LoadSettings.rounds, metavar="K", takes="a count >= 1",
           valid=lambda v: v >= 1, brief="rounds per cell level or eval row (median and interval from the rounds)",
           into="load.rounds"),
    Option("--results-dir", "results root", type=Path, shown="<rootdir>/results", into="results_dir"),
    Option("--run-id", "run id shared by every cell of this session", shown="UTC timestamp", into="run_id"),
    Option("--share-server", "one server for all levels", action="store_true", note=": one per level",
           into="server.share_server"),
    Option("--port", "server port (0: any free port)", type=int, shown="the adapter's port",
           takes="a port number from 0 (any free port) to 65535", valid=lambda v: 0 <= v <= 65535, into="server.port"),
    Option("--install", "install a missing framework instead of skipping its cells", action="store_true",
           into="server.install"),
    Option("--pinned", "serve each framework at its adapter's pinned version, not the newer one "
           "`cellbench update` installed and recorded", action="store_true",
           brief="the adapters' pinned versions, not the ones `cellbench update` recorded", into="server.pinned"),
    Option("--request-timeout", "per-request timeout, seconds", type=float, default=DEFAULT_REQUEST_TIMEOUT_S,
           takes="seconds, more than 0", valid=lambda v: v > 0, into="client.request_timeout_s"),
    Option("--ready-timeout", "how long a server (started or --endpoint) may take to answer its ready path",
           type=float, metavar="SECONDS", shown="the adapter's startup timeout", takes="seconds, more than 0",
           valid=lambda v: v > 0, into="server.ready_timeout_s"),
    Option("--ignore-eos", "send ignore_eos where the framework accepts it", action="store_true",
           into="client.ignore_eos"),
    Option("--tools-param", "send agent tools in the request's `tools` parameter", action="store_true",
           into="client.tools_param"),
    Option("--prompts", "a prompt file instead of the shipped splits: one for every split, or one per split it names "
           "(a split it leaves out keeps its shipped file)", metavar="PATH|chat=PATH,agent=PATH",
           shown="the shipped prompts/<split>.json", parse=parsers.prompt_files,
           brief="a prompt file instead of the shipped splits: one for all, or one per split", into="client.prompts"),
    Option("--degraded-threshold", "failure share that makes a cell degraded", type=float,
           default=DEFAULT_DEGRADED_THRESHOLD, takes="a failure share from 0 to 1", valid=lambda v: 0 <= v <= 1,
           into="reporting.degraded_threshold"),
    Option("--price-kwh", "electricity's price per kWh: each level's cost per million output tokens from its energy "
           "(above idle where known)", type=float, metavar="PRICE", shown="none", takes="a price, 0 or more",
           valid=lambda v: v >= 0, brief="electricity per kWh, for each level's cost per million output tokens",
           into="reporting.price_kwh"),
    Option("--price-hour", "the machine's price per hour: each level's cost per million output tokens from its wall "
           "time", type=float, metavar="PRICE", shown="none", takes="a price, 0 or more", valid=lambda v: v >= 0,
           brief="the machine per hour, for each level's cost per million output tokens", into="reporting.price_hour"),
    Option("--strict-verdicts", "degraded and capped cells fail the run", action="store_true",
           into="reporting.strict_verdicts"),
    Option("--host-lock-timeout", "seconds to wait for another cell's host lock; then the cell is failed, naming "
           "the holder", type=float, default=BudgetSettings.host_lock_timeout_s, takes="seconds, 0 or more",
           valid=lambda v: v >= 0, into="budget.host_lock_timeout_s"),
    Option("--api-key", "send Authorization: Bearer KEY to every server, and give it to servers whose command "
           "names {api_key}", metavar="KEY", shown="$OPENAI_API_KEY, else the variable the profile's api_key_env names",
           brief="the servers' API key, sent as Authorization: Bearer KEY", into="server.api_key"),
    Option("--endpoint", "benchmark this already-running server (e.g. http://127.0.0.1:8080) with the generic "
           "openai adapter; only its cells run, nothing is started or stopped", shown="none", parse=parsers.endpoint,
           brief="benchmark this running server (its base URL); nothing is started", into="server.endpoint"),
    Option("--progress-interval", "seconds between a cell's progress lines during a level; none for shorter levels, "
           "0 turns them off", type=float, default=DEFAULT_INTERVAL_S, takes="seconds, 0 (no progress lines) or more",
           valid=lambda v: v >= 0, brief="seconds between a cell's progress lines (0: none)",
           into="reporting.progress_interval_s"),
    Option("--cell-budget", "wall-clock budget per cell, one for every split or one per split (s, m or h; a bare "
           "number is seconds): at the deadline the level stops, finished and partial levels are kept and the "
           "cell ends capped", metavar="S|chat=45m,agent=90m", shown=_BUDGETS,
           note="; less when pytest's --timeout minus a margin is less", parse=parsers.cell_budget,
           brief="a cell's wall-clock budget, for every split or per split; then it ends capped",
           into="budget.cell_budget_s"),
    Option("--hang-minutes", "no output and no finished request for this long cancels the level: capped, "
           "'no progress'", default=_HANG, metavar=_HANG, parse=parsers.hang,
           brief="minutes without progress that cancel a level (capped)", into="budget.hang_s"),
    Option("--memory-limit", "run each server in a memory cgroup of SIZE (e.g. 8G) to emulate a smaller machine",
           metavar="SIZE", shown="none", parse=parsers.memory_limit, into="server.memory_limit_bytes"),
    Option("--client-cpus", "run each level's client (this pytest process) on these CPUs, e.g. 1 or 2-3 (Linux only)",
           default="auto", metavar="LIST|auto|off",
           note=": the last CPU on a host with 4 or more CPUs and no GPU, else off",
           brief="the CPUs of each level's client (Linux)", into="client.cpus"),
    Option("--server-cpus", "start each server, and everything it starts, on these CPUs, e.g. 0 or 0-2 (Linux only)",
           default="auto", metavar="LIST|auto|off", note=": the CPUs --client-cpus leaves",
           brief="the CPUs of each server and its children (Linux)", into="client.cpus"),
    Option("--client-procs", "client processes per level: N, or auto", default="auto", into="client.client_procs"),
    Option("--unique-prompts", "open every request's first message with its own nonce, so no request can be served "
           "from a cache another one filled: cold numbers", action="store_true",
           brief="a nonce opens every request: nothing served from a cache", into="client.unique_prompts"),
    Option("--cache-audit", "after a cell's last level, on its server, send 8 prompts with fresh nonces and then the "
           "same 8 again at concurrency 1, and annotate the cell `cached` when the repeats' TTFT is at least a "
           "tenth lower, by the upper end of its 95 percent interval (docs/metrics.md, Audits)", action="store_true",
           brief="an audit round: repeated prompts against their first TTFT", into="load.cache_audit"),
    Option("--fidelity", "after a cell's last level, on its server, send 16 of the split's prompts greedy "
           "(temperature 0, 32 tokens) twice, and compare the answers with the cell's own second pass and with the "
           "reference stack's; annotate the cell `fidelity` where it diverges from the reference more than the "
           "reference from itself (docs/metrics.md, Fidelity)", action="store_true",
           brief="greedy answers against the reference stack's", into="load.fidelity"),
    Option("--fidelity-reference", "the framework whose answers --fidelity compares with: its newest result in the "
           "cell's folder", default="hf_transformers", metavar="FRAMEWORK",
           brief="the stack --fidelity compares with", into="load.fidelity_reference"),
    Option("--keep-alive", "reuse connections across a level's requests while the server keeps them open "
           "(docs/client-performance.md)", action="store_true", note=": one connection per request",
           brief="reuse connections across a level's requests", into="client.keep_alive"),
    Option("--no-keep-alive", "one connection per request", action="store_false", dest="keep_alive", shown="default",
           into="client.keep_alive"),
    Option("--server-metrics", "scrape each started server's Prometheus /metrics as every level starts and ends and "
           "every SECONDS during it (on: every 2 s), where its adapter declares them, turning them on where a flag "
           "does (llama-server --metrics); off: neither", default="on", metavar="on|off|SECONDS",
           parse=parsers.scrape_interval,
           brief="scrape the servers' own metrics around and during each level (on: every 2 s)",
           into="server.server_metrics_s"),
    Option("--skip-existing", "keep, not re-measure, a cell's non-failed result of this machine in this run "
           "(--run-id), or newer than HOURS: the cell reports that result's verdict, annotated resumed", type=float,
           nargs="?", const=0.0, metavar="HOURS", shown="off", takes="hours, 0 or more", valid=lambda v: v >= 0,
           parse=parsers.hours_to_s, brief="keep a cell's result of this run (or newer than HOURS), not re-measure it",
           into="budget.skip_existing_s"),
)


def cell_option(flag: str) -> Option:
    """The declaration of a cell option, by its flag: for a `cellbench` command that takes it too."""
    return next(option for option in OPTIONS if option.flag == flag)
