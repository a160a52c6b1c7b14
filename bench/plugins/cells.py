"""The pytest plugin: options, one test per (framework, split) cell, verdicts as report categories.

The fine verdict rides on the test report (`report.cellbench`, plain JSON-able data, so it
crosses from xdist workers to the controller), while the pytest outcome stays coarse: ok and
degraded pass, wrong-model / all-failed / failed / oom fail, skipped skips. A cell whose setup
decides its verdict (the host lock timed out: `settle_before_call`) reports it the same way
without its body running. The terminal counts `degraded` and `capped` as their own categories
and ends with one line of verdict counts, the
run id and results root, and the reports and journals the session wrote (not each cell's files).
With `--html`, the same report data fills the pytest-html report
(bench/reports/html_review.py); during long levels each cell writes a rate-limited progress line
(bench/load/progress.py).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import pytest_timeout

import adapters
from bench.host import affinity
from bench.reports import html_review
from bench.host import memlimit
from bench.setup import profiles
from bench.plugins import rootdir
from bench.plugins import signals
from bench.run.cell import CellConfig, CellOutcome
from bench.reports.journal import CellEntry, Journal
from bench.host.machine import detect
from bench.load.progress import DEFAULT_INTERVAL_S, ProgressLine, terminal_writer
from bench.setup.prompts import PromptFileError, load_prompts
from bench.reports.rebuild import rebuild_split
from bench.core.result import new_run_id, now_iso
from bench.run.server import reap_orphans
from bench.core.verdicts import Verdict, dominant_error

SPLITS = ("chat", "agent")
CELL_OUTCOME = pytest.StashKey[CellOutcome]()
SETTLED = pytest.StashKey[CellOutcome]()  # decided during setup: the body is not run (settle_before_call)
IN_CALL = pytest.StashKey[bool]()  # the test's body has started
RUN_ID = pytest.StashKey[str]()
LEVELS = pytest.StashKey[tuple]()
PROFILE = pytest.StashKey["profiles.ModelProfile"]()
VERDICTS = pytest.StashKey[Counter]()
ENDPOINT = pytest.StashKey["str | None"]()
HANG_S = pytest.StashKey[dict]()
MEMORY_LIMIT = pytest.StashKey["int | None"]()
CPUS = pytest.StashKey[affinity.Placement]()
TIMEOUT_MARGIN_S = 60.0  # under --timeout: time to stop the server and write the result

# verdict -> (category, letter, verbose word) for pytest_report_teststatus
_STATUS = {
    Verdict.OK: ("passed", ".", "OK"),
    Verdict.DEGRADED: ("degraded", "D", "DEGRADED"),
    Verdict.CAPPED: ("capped", "C", "CAPPED"),
    Verdict.WRONG_MODEL: ("failed", "F", "WRONG-MODEL"),
    Verdict.ALL_FAILED: ("failed", "F", "ALL-FAILED"),
    Verdict.OOM: ("failed", "F", "OOM"),
    Verdict.FAILED: ("failed", "F", "FAILED"),
}


def _levels(text: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise pytest.UsageError(f"--concurrency takes comma-separated integers, got {text!r}") from None
    if not levels or min(levels) < 1:
        raise pytest.UsageError(f"--concurrency levels must be >= 1, got {text!r}")
    return levels


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


def _hang_seconds(text: str) -> dict[str, float]:
    """`chat=30,agent=45` (minutes; fractions allowed) -> seconds per split; 0 turns the watchdog off."""
    try:
        pairs = dict(part.split("=", 1) for part in text.split(",") if part.strip())
        minutes = {split.strip(): float(value) for split, value in pairs.items()}
    except ValueError:
        raise pytest.UsageError(f"--hang-minutes takes split=minutes pairs such as chat=30,agent=45, got {text!r}") from None
    unknown = set(minutes) - set(SPLITS)
    if unknown or any(m < 0 for m in minutes.values()):
        raise pytest.UsageError(f"--hang-minutes: splits are {', '.join(SPLITS)} and minutes >= 0, got {text!r}")
    return {split: m * 60.0 for split, m in minutes.items()}


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


# option -> (what it takes, the test its value must pass); checked once, before any server starts
_NUMBERS = {
    "requests": ("a count of measured requests per level, 1 or more", lambda v: v >= 1),
    "warmup": ("a count of warm-up requests per level, 0 or more", lambda v: v >= 0),
    "request_timeout": ("seconds, more than 0", lambda v: v > 0),
    "ready_timeout": ("seconds, more than 0", lambda v: v > 0),
    "cell_budget": ("seconds, more than 0", lambda v: v > 0),
    "host_lock_timeout": ("seconds, 0 or more", lambda v: v >= 0),
    "progress_interval": ("seconds, 0 (no progress lines) or more", lambda v: v >= 0),
    "degraded_threshold": ("a failure share from 0 to 1", lambda v: 0 <= v <= 1),
    "port": ("a port number from 0 (any free port) to 65535", lambda v: 0 <= v <= 65535),
    "skip_existing": ("hours, 0 or more", lambda v: v >= 0),
}


def _check_numbers(config: pytest.Config) -> None:
    for dest, (takes, valid) in _NUMBERS.items():
        value = config.getoption(dest, None)
        if value is not None and not valid(value):
            raise pytest.UsageError(f"--{dest.replace('_', '-')} takes {takes}, got {value:g}")


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


def _session_timeout(config: pytest.Config) -> tuple[float | None, str]:
    """pytest-timeout's timeout for every test (--timeout, else $PYTEST_TIMEOUT, else the ini's
    `timeout`), as pytest-timeout resolves it, and where it came from."""
    if not config.pluginmanager.hasplugin("timeout"):
        return None, ""
    timeout = pytest_timeout.get_env_settings(config).timeout
    if timeout is None:
        return None, ""
    if config.getoption("timeout") is not None:
        source = f"--timeout={timeout:g}"
    elif os.environ.get("PYTEST_TIMEOUT"):
        source = f"PYTEST_TIMEOUT={timeout:g}"
    else:
        source = f"the ini setting timeout = {timeout:g}"
    return timeout, source


def _no_budget_left(source: str) -> str:
    return (f"{source} leaves a cell no budget: cellbench keeps {TIMEOUT_MARGIN_S:g} s of "
            f"pytest-timeout's timeout to stop the server and write the result; pass a timeout above "
            f"{TIMEOUT_MARGIN_S:g} s (e.g. --timeout=5400), or --cell-budget SECONDS to set the budget yourself")


def _item_timeout(item: pytest.Item) -> float | None:
    """pytest-timeout's timeout for `item`, resolved by pytest-timeout itself (a `timeout` marker,
    else --timeout, $PYTEST_TIMEOUT, the ini's `timeout`); None when the item has none."""
    if not item.config.pluginmanager.hasplugin("timeout"):
        return None
    timeout = pytest_timeout._get_item_settings(item).timeout
    return timeout if timeout is not None and timeout > 0 else None


def _cell_budget(item: pytest.Item) -> float | None:
    """The cell's wall-clock budget: --cell-budget, capped by the item's pytest-timeout timeout less
    a margin, so the cell stops itself and keeps its levels before the backstop kills the test
    with nothing written. A timeout within the margin was refused at collection unless
    --cell-budget was given; then that budget stands."""
    budget = item.config.getoption("cell_budget")
    timeout = _item_timeout(item)
    if timeout is None or timeout <= TIMEOUT_MARGIN_S:
        return budget
    backstop = timeout - TIMEOUT_MARGIN_S
    return backstop if budget is None else min(budget, backstop)


def pytest_collection_finish(session: pytest.Session) -> None:
    """A selected cell whose timeout leaves it no budget is a usage error before any server starts
    (under xdist the controller checks, in _XdistHooks: a worker cannot stop the session cleanly)."""
    if session.config.getoption("cell_budget") is not None or hasattr(session.config, "workerinput"):
        return
    for item in session.items:
        timeout = _item_timeout(item) if "cell_id" in getattr(item, "fixturenames", ()) else None
        if timeout is not None and timeout <= TIMEOUT_MARGIN_S:
            if item.get_closest_marker("timeout") is not None:
                raise pytest.UsageError(_no_budget_left(f"@pytest.mark.timeout({timeout:g}) on {item.nodeid}"))
            raise pytest.UsageError(_no_budget_left(_session_timeout(session.config)[1]))


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """`--results-dir /tmp/x` is an option's value, not a test path: decide the rootdir again
    (bench/plugins/rootdir.py), now that an installed cellbench's options are known."""
    rootdir.redecide(early_config, parser, args)


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("cellbench", "cellbench benchmark cells")
    g.addoption("--model", default="tiny", help="model profile name (models/<name>.yaml) or a profile path [tiny]")
    g.addoption("--concurrency", default="1,8,16", help="closed-loop concurrency levels [1,8,16]")
    g.addoption("--requests", type=int, default=100, help="measured requests per level [100]")
    g.addoption("--warmup", type=int, default=3, help="warm-up requests per level, not measured [3]")
    g.addoption("--results-dir", type=Path, default=None, help="results root [<rootdir>/results]")
    g.addoption("--run-id", default=None, help="run id shared by every cell of this session [UTC timestamp]")
    g.addoption("--share-server", action="store_true", help="one server for all levels (default: one per level)")
    g.addoption("--port", type=int, default=None, help="server port (0: any free port) [the adapter's port]")
    g.addoption("--install", action="store_true", help="install a missing framework instead of skipping its cells")
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
    g.addoption("--endpoint", default=None,
                help="benchmark this already-running server (e.g. http://127.0.0.1:8080) with the generic "
                     "openai adapter; only its cells run, nothing is started or stopped")
    g.addoption("--progress-interval", type=float, default=DEFAULT_INTERVAL_S,
                help="seconds between a cell's progress lines during a level; none for shorter levels, "
                     f"0 turns them off [{DEFAULT_INTERVAL_S:g}]")
    g.addoption("--cell-budget", type=float, default=None, metavar="SECONDS",
                help="wall-clock budget per cell: at the deadline the level stops, finished and partial levels "
                     "are kept and the cell ends capped [none; pytest's --timeout minus a margin when given]")
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
    g.addoption("--unique-prompts", action="store_true",
                help="open every request's first message with its own nonce, so no request can be served "
                     "from a cache another one filled: cold numbers")
    g.addoption("--skip-existing", type=float, nargs="?", const=0.0, default=None, metavar="HOURS",
                help="keep, not re-measure, a cell's non-failed result of this machine in this run (--run-id), or "
                     "newer than HOURS: the cell reports that result's verdict, annotated resumed")


def pytest_configure(config: pytest.Config) -> None:
    for name in adapters.registry():
        config.addinivalue_line("markers", f"{name}: framework {name}")
    workerinput = getattr(config, "workerinput", None)
    config.stash[RUN_ID] = (workerinput or {}).get("cellbench_run_id") or config.getoption("run_id") or new_run_id()
    config.stash[VERDICTS] = Counter()
    # Bad options are usage errors now, not one failed test per cell later.
    config.stash[LEVELS] = _levels(config.getoption("concurrency"))
    config.stash[ENDPOINT] = _endpoint(config.getoption("endpoint"))
    config.stash[HANG_S] = _hang_seconds(config.getoption("hang_minutes"))
    config.stash[MEMORY_LIMIT] = _memory_limit(config.getoption("memory_limit"))
    config.stash[CPUS] = _cpus(config)
    _check_numbers(config)
    try:
        config.stash[PROFILE] = profiles.load_profile(config.getoption("model"))
    except profiles.ProfileError as exc:
        raise pytest.UsageError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:  # a profile file that exists but cannot be read
        raise pytest.UsageError(f"--model {config.getoption('model')}: cannot read: {exc}") from None
    _check_prompts(config)
    # SIGTERM and SIGHUP interrupt like Ctrl-C: servers stopped, partial journal (bench/plugins/signals.py).
    config.add_cleanup(signals.install())
    config.pluginmanager.register(_InterruptedCell(), "cellbench-interrupted-cell")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistHooks(), "cellbench-xdist")
    if workerinput is None:
        config.pluginmanager.register(RunRecorder(config), "cellbench-recorder")
        if config.pluginmanager.hasplugin("html"):
            config.pluginmanager.register(html_review.HtmlColumns(), "cellbench-html")
            html_review.add_session_facts(config, run_id=config.stash[RUN_ID], machine=detect().to_json(),
                                          model=config.stash[PROFILE].results_name)


class _XdistHooks:
    """Every worker gets the controller's run id, so one session writes one run."""

    def pytest_configure_node(self, node) -> None:
        node.workerinput["cellbench_run_id"] = node.config.stash[RUN_ID]

    def pytest_xdist_node_collection_finished(self, node, ids: list[str]) -> None:
        """pytest_collection_finish's check, on the controller, before any cell is scheduled. It sees
        node ids only, so a `timeout` marker's value is not checked here."""
        timeout, source = _session_timeout(node.config)
        short = timeout is not None and timeout <= TIMEOUT_MARGIN_S and node.config.getoption("cell_budget") is None
        if short and any("test_cell[" in nodeid for nodeid in ids):
            raise pytest.UsageError(_no_budget_left(source))


class _InterruptedCell:
    """A cell interrupted (Ctrl-C, SIGTERM, SIGHUP) after run_cell wrote its partial result, which
    run_cell attaches to the interrupt as `cell_outcome`: the cell reports that outcome as any cell
    reports its verdict (counted, journaled, in the HTML report), then the session stops as
    interrupted (exit code 2, journal status `partial`)."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        try:
            return (yield)
        except KeyboardInterrupt as exc:
            outcome = getattr(exc, "cell_outcome", None)
            if outcome is None:
                raise
            item.session.shouldstop = f"cellbench: {str(exc) or type(exc).__name__}"
            _enforce(item, outcome)
            return None


def pytest_sessionstart(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):
        return
    reaped = reap_orphans()
    memlimit.reap_stale()  # empty memory cgroups of sessions that are gone
    if reaped:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter:
            reporter.write_line(f"cellbench: stopped {len(reaped)} server(s) left by a killed session: {reaped}")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "cell_id" not in metafunc.fixturenames:
        return
    # An endpoint is one server of unknown make: only adapters that bind to it can address it.
    registry = adapters.registry()
    endpoint = metafunc.config.stash[ENDPOINT]
    names = sorted(name for name, a in registry.items() if a.takes_endpoint or not endpoint)
    params = [
        pytest.param((name, split), id=f"{name}-{split}", marks=[getattr(pytest.mark, split), getattr(pytest.mark, name)])
        for name in names
        for split in SPLITS
    ]
    metafunc.parametrize("cell_id", params)


@pytest.fixture
def cell_config(cell_id: tuple[str, str], request: pytest.FixtureRequest) -> CellConfig:
    framework, split = cell_id
    opt = request.config.getoption
    return CellConfig(
        framework=framework,
        split=split,
        profile=request.config.stash[PROFILE],
        results_root=_results_root(request.config),
        run_id=request.config.stash[RUN_ID],
        levels=request.config.stash[LEVELS],
        requests=opt("requests"),
        warmup=opt("warmup"),
        share_server=opt("share_server"),
        port=opt("port"),
        request_timeout_s=opt("request_timeout"),
        ready_timeout_s=opt("ready_timeout"),
        install=opt("install"),
        ignore_eos=opt("ignore_eos"),
        tools_param=opt("tools_param"),
        prompts_path=opt("prompts"),
        degraded_fraction=opt("degraded_threshold"),
        endpoint=request.config.stash[ENDPOINT],
        progress=ProgressLine(f"{framework}-{split}", terminal_writer(request.config),
                              interval_s=opt("progress_interval")),
        budget_s=_cell_budget(request.node),
        budget_from=time.perf_counter(),  # this fixture runs first: the lock wait and an install count
        stall_timeout_s=request.config.stash[HANG_S].get(split) or None,
        memory_limit_bytes=request.config.stash[MEMORY_LIMIT],
        skip_existing_s=None if opt("skip_existing") is None else opt("skip_existing") * 3600.0,
        cpus=request.config.stash[CPUS],
        unique_prompts=opt("unique_prompts"),
    )


@pytest.fixture
def enforce_verdict(request: pytest.FixtureRequest):
    """Record the cell's outcome for the report, then assert its verdict as a pytest outcome."""
    return partial(_enforce, request.node)


def _enforce(item: pytest.Item, outcome: CellOutcome) -> None:
    item.stash[CELL_OUTCOME] = outcome
    verdict, reason = outcome.verdict.verdict, outcome.verdict.reason
    if verdict is Verdict.SKIPPED:
        pytest.skip(reason)
    failing = verdict.is_failure or (item.config.getoption("strict_verdicts") and verdict is not Verdict.OK)
    if failing:
        where = f"\nresult: {outcome.result_path}" if outcome.result_path else ""
        pytest.fail(f"{verdict.value}: {reason}{where}", pytrace=False)


def settle_before_call(item: pytest.Item, outcome: CellOutcome) -> None:
    """Settle a test with `outcome` without running its body (a fixture found during setup that
    the cell cannot run, e.g. the host lock timed out): its call phase reports `outcome` through
    the same path as a cell's verdict, so it is counted, journaled and in the HTML report. Called
    from inside a running body (a fixture requested there), it fails the test at once."""
    if item.stash.get(IN_CALL, False):
        pytest.fail(f"{outcome.verdict.verdict.value}: {outcome.verdict.reason}", pytrace=False)
    item.stash[SETTLED] = outcome


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    item.stash[IN_CALL] = True
    settled = item.stash.get(SETTLED, None)
    if settled is not None:  # raising here keeps pytest from running the body
        _enforce(item, settled)


def _results_root(config: pytest.Config) -> Path:
    """--results-dir (relative to where pytest was invoked), else <rootdir>/results; absolute."""
    given = config.getoption("results_dir")
    return config.invocation_params.dir / given if given else config.rootpath / "results"


def _evidence(result: dict) -> dict:
    """What the journal shows: the dominant error and the server logs of a failure, and why the
    cell is suspicious (bench.run.cell compared it with the cell's previous result)."""
    evidence: dict = {"server_logs": [s["log"] for s in result.get("servers", []) if s.get("log")]}
    dominant = dominant_error(tuple(result.get("levels", ())))
    if dominant:
        evidence["dominant_error"] = dominant
    suspicious = result.get("verdict", {}).get("suspicious")
    if suspicious:
        evidence["suspicious"] = suspicious
    return evidence


def _html_path(config: pytest.Config) -> Path | None:
    """Where pytest-html writes its report (resolved as pytest-html does), or None without --html."""
    html = config.getoption("htmlpath", None) if config.pluginmanager.hasplugin("html") else None
    return Path.cwd() / Path(os.path.expandvars(html)).expanduser() if html else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    outcome = item.stash.get(CELL_OUTCOME, None)
    if outcome is not None and report.when == "call":
        # Plain data only: under xdist the report travels to the controller.
        report.cellbench = {
            "verdict": outcome.verdict.verdict.value,
            "reason": outcome.verdict.reason,
            "annotations": list(outcome.verdict.annotations),
            "result_path": str(outcome.result_path) if outcome.result_path else None,
            "evidence": _evidence(outcome.result),
            "row": html_review.row_data(outcome.result),
        }
        if outcome.result.get("framework"):
            report.cellbench["framework_version"] = [outcome.result["framework"]["name"],
                                                     outcome.result["framework"]["version"]]
        cell_id = item.callspec.params.get("cell_id") if hasattr(item, "callspec") else None
        if cell_id is not None:  # a benchmark cell (not a plugin test's stand-in): it goes in the journal
            report.cellbench.update(
                framework=cell_id[0],
                split=cell_id[1],
                model=item.config.stash[PROFILE].results_name,
                machine=detect().slug,
                results_root=str(_results_root(item.config)),
            )
        report.user_properties.append(("cellbench_verdict", outcome.verdict.verdict.value))
        if _html_path(item.config) is not None:  # built here: under xdist only this side has the files
            report.extras = [*getattr(report, "extras", []), *html_review.extras_for(report.cellbench, outcome.result)]
    return report


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):
    data = getattr(report, "cellbench", None)
    if not data or report.when != "call" or report.skipped:
        return None
    verdict = Verdict(data["verdict"])
    if report.failed and verdict in (Verdict.DEGRADED, Verdict.CAPPED):  # --strict
        category, letter, word = "failed", "F", verdict.value.upper()
    else:
        category, letter, word = _STATUS[verdict]
    color = {"passed": "green", "failed": "red"}.get(category, "yellow")
    return category, letter, (word, {color: True})


class RunRecorder:
    """On the controller: counts verdicts, writes the journal after every cell, and at the end
    rebuilds comparison.json, REPORT.md and the plots of every split this session touched."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.started_at = now_iso()
        self.journals: dict[Path, Journal] = {}
        self.split_dirs: set[Path] = set()
        self.written: list[Path] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, "cellbench", None)
        if not data or report.when != "call":
            return
        self.config.stash[VERDICTS][data["verdict"]] += 1
        if data.get("framework_version"):
            html_review.add_framework_version(self.config, *data["framework_version"])
        if "framework" not in data:
            return
        directory = Path(data["results_root"]) / data["model"] / data["machine"]
        if directory not in self.journals:
            self.journals[directory] = Journal.open(
                directory, model=data["model"], machine=data["machine"], started_at=self.started_at
            )
        self.journals[directory].record(
            CellEntry(data["framework"], data["split"], data["verdict"], data["reason"], data["result_path"],
                      data["annotations"], data["evidence"])
        )
        if data["result_path"]:
            self.split_dirs.add(Path(data["result_path"]).parent)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        for split_dir in sorted(self.split_dirs):
            written = rebuild_split(split_dir)[1]
            self.written += written[:2]  # comparison.json, REPORT.md
            if written[2:]:
                self.written.append(written[2].parent)  # plots/
        for journal in self.journals.values():
            journal.finish(interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)
            self.written.append(journal.md_path)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        counts = self.config.stash[VERDICTS]
        if not counts:
            return
        order = [v.value for v in Verdict]
        line = ", ".join(f"{counts[v]} {v}" for v in order if counts[v])
        terminalreporter.write_sep("=", f"cellbench verdicts: {line}")
        terminalreporter.write_line(f"run {self.config.stash[RUN_ID]}; results under {_results_root(self.config)}")
        html = _html_path(self.config)
        for path in [*self.written, *([html] if html else [])]:
            terminalreporter.write_line(f"  {path}{os.sep if path.is_dir() else ''}")
