"""The fault matrix: a real cell against the suite's own misbehaving server, one test per (mode, form).

Every case runs a real pytest session (`pytest -m chat -k openai`) in a subprocess against
tests/support/faultserver.py, in one of two forms: `command`, where the cell starts and stops the
server from a model profile's `openai.command`, and `endpoint`, where this test starts the server
in its own process group and names it with `--endpoint`. Each test then checks what a user would
read: the verdict and its reason, typed error samples with messages, a result file that follows
the schema, the journal's entry for the cell, and that no process of the case is left.

The sessions are independent (each has its own results directory and cellbench cache, hence its
own host lock), so the selected cases run JOBS at a time in the background, in collection order,
and each test waits for its own. `pytest tests/run/test_faults.py` (or `pytest tests -k fault`) runs
the matrix; `-k "fault and exit_mid_level"` one mode in both forms.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import psutil
import pytest

from bench.base.paths import PROJECT_ROOT
from bench.core.records import ErrorType
from bench.core.result.files import validate
from bench.reports.journal import JOURNAL_DAY_ENV
from tests.support.busy import client_limited
from tests.support.faultserver import DEFAULT_TOKENS, EXIT_CODE, MODES, OTHER_ID, RETRY_AFTER_S, SHORT_TOKENS

pytestmark = pytest.mark.integration

HOST = "127.0.0.1"
SERVED_ID = "tiny"
RESULTS_NAME = "fault"
REQUESTS = 9  # measured requests per level; levels c=1 and c=2, one warm-up request each
LEVELS = [1, 2]
JOBS = 2  # sessions at once: most of a session is its interpreter starting, one core each
SESSION_TIMEOUT_S = 300.0
HELD = "port_held"  # not a server mode: a plain socket that never answers holds the port
FORMS = ("command", "endpoint")
FAILURE_VERDICTS = ("failed", "all-failed", "wrong-model", "oom")
JOURNAL_FAILURES = ("failed", "all-failed", "wrong-model", "degraded", "capped")


@dataclass
class Case:
    """One session's inputs and what it left behind."""

    mode: str
    form: str
    directory: Path
    tag: str = field(default_factory=lambda: f"fault-{secrets.token_hex(4)}")  # on every server's argv
    port: int | None = None  # the held port, or the endpoint's
    day: str = field(default_factory=lambda: date.today().isoformat())
    returncode: int | None = None
    output: str = ""
    endpoint_exit: int | None = None  # how the endpoint's server ended (endpoint form)

    @property
    def fault(self) -> Fault:
        return expected(self.mode, self.form)

    @property
    def results(self) -> Path:
        return self.directory / "results"

    def result(self) -> dict:
        paths = sorted(self.results.glob(f"{RESULTS_NAME}/*/chat/openai_*.json"))
        assert len(paths) == 1, f"expected one result file, found {paths}\n{self.tail()}"
        data = json.loads(paths[0].read_text())
        validate(data)
        return data

    def server_logs(self) -> list[Path]:
        logs = sorted(self.results.glob(f"{RESULTS_NAME}/*/chat/logs/*.server.log"))
        return [*logs, self.directory / "endpoint.log"] if self.form == "endpoint" else logs

    def server_pids(self) -> list[int]:
        return [int(pid) for log in self.server_logs() if log.is_file()
                for pid in re.findall(r"^faultserver pid (\d+):", log.read_text(errors="replace"), re.M)]

    def tail(self) -> str:
        return f"--- session output ({self.mode}, {self.form}) ---\n{self.output[-4000:]}"


# ------------------------------------------------------------------ what each mode must give


@dataclass(frozen=True)
class Fault:
    """How a mode runs, and what its cell must say."""

    verdict: str
    reason: str  # a regex the verdict's reason matches (re.search); `{port}` is the case's port
    server_args: tuple[str, ...] = ()
    requests: int = REQUESTS
    hang_minutes: float = 1.0  # the watchdog: never in the way, except where it is the point
    ready_timeout_s: float = 60.0
    annotations: tuple[str, ...] = ()  # among the verdict's annotations
    check: Callable[[Case, dict], None] | None = None
    sampling: str = "{temperature: 1.0}"  # the profile's sampling, sent with every request
    session_args: tuple[str, ...] = ()  # more options for the session ({dir}: the case's directory)


def answered(tokens_per_chunk: float = 1.0) -> Callable[[Case, dict], None]:
    """Both levels ran every request to success, each with the server's token count from usage."""

    def check(case: Case, result: dict) -> None:
        levels = result["levels"]
        assert [lv["concurrency"] for lv in levels] == LEVELS
        for lv in levels:
            assert lv["successful"] == lv["num_requests"] == case.fault.requests, lv["error_samples"]
            assert lv["usage_available"] and lv["output_tokens_total"] == case.fault.requests * DEFAULT_TOKENS
            assert lv["tokens_per_chunk"] == tokens_per_chunk
            accounting = lv["audits"]["token_accounting"]  # usage against chunks: 4 tokens a chunk diverges
            assert accounting["outcome"] == ("pass" if tokens_per_chunk == 1.0 else "diverges"), accounting
            assert lv["audits"]["output_length"]["outcome"] == "not applicable"  # no ignore_eos in the profile

    return check


def stopped_short(case: Case, result: dict) -> None:
    """ignore_eos was sent, and every third chat request stopped after SHORT_TOKENS tokens: 3 of each
    level's 9 (the warm-ups are requests 1 and, on a shared server, 11). The result, REPORT.md, the
    journal and the HTML report say so; the verdict stays ok."""
    assert result["run_config"]["request_extras"]["ignore_eos"] is True
    for lv in result["levels"]:
        audit = lv["audits"]["output_length"]
        assert (audit["outcome"], audit["short"], audit["requests"]) == ("stopped short", 3, REQUESTS), audit
        assert audit["short_min_tokens"] == SHORT_TOKENS and audit["short_finish_reasons"] == {"stop": 3}
        assert lv["audits"]["token_accounting"]["outcome"] == "pass"
    line = f"c=1: output length stopped short: 3 of {REQUESTS} successful requests stopped short of max_tokens"
    (report,) = case.results.glob(f"{RESULTS_NAME}/*/chat/REPORT.md")
    assert f"- openai: {line}" in report.read_text()
    (journal,) = case.results.glob(f"{RESULTS_NAME}/*/weekly_{case.day}.journal.md")
    assert f"- openai / chat: {line}" in journal.read_text()
    assert line in (case.directory / "report.html").read_text()


def samples_say(kind: str, text: str) -> Callable[[Case, dict], None]:
    """The levels' error samples of `kind` quote `text` (in the message or the body's head)."""

    def check(case: Case, result: dict) -> None:
        samples = [s for lv in result["levels"] for s in lv["error_samples"].get(kind, [])]
        assert samples, [lv["error_samples"] for lv in result["levels"]]
        assert any(text in s["message"] or text in (s.get("body_head") or "") for s in samples), samples

    return check


def samples_are(kind: str, message: str) -> Callable[[Case, dict], None]:
    """Every error sample of the levels is of `kind`, with exactly `message`."""

    def check(case: Case, result: dict) -> None:
        samples = [(k, s["message"]) for lv in result["levels"] for k, got in lv["error_samples"].items() for s in got]
        assert samples and set(samples) == {(kind, message)}, samples

    return check


def decoded(case: Case, result: dict) -> None:
    """Every request's gzip stream was decoded and counted as compressed, its answer whole."""
    answered()(case, result)
    assert [lv["content_encodings"] for lv in result["levels"]] == [{"gzip": case.fault.requests}] * len(LEVELS)


def retry_after_kept(case: Case, result: dict) -> None:
    samples = [s for lv in result["levels"] for s in lv["error_samples"]["http_4xx"]]
    assert samples and all(s["http_status"] == 429 and s["retry_after"] == str(RETRY_AFTER_S) for s in samples), samples


def ready_late(case: Case, result: dict) -> None:
    answered()(case, result)
    if case.form == "command":  # each level's server answered 503 for its first seconds
        assert all(s["ready_after_s"] >= 3.0 for s in result["servers"]), result["servers"]


def died_in_first_level(case: Case, result: dict) -> None:
    """The server died in c=1: no later level ran, and its exit is on record as not ours."""
    assert [lv["concurrency"] for lv in result["levels"]] == [1]
    (server,) = result["servers"]
    assert server["exit"]["returncode"] == EXIT_CODE and not server["exit"]["stopped_by_us"]


def died_in_second_level(case: Case, result: dict) -> None:
    assert [lv["concurrency"] for lv in result["levels"]] == LEVELS
    assert result["levels"][0]["successful"] == REQUESTS
    assert case.endpoint_exit == EXIT_CODE


def capped_in_warmup(case: Case, result: dict) -> None:
    """The watchdog fired during c=1's warm-up: the level is kept, empty, with its warm-up's errors."""
    assert "during warm-up" in result["verdict"]["reason"]
    (level,) = result["levels"]
    assert level["concurrency"] == 1 and level["num_requests"] == 0
    assert level["warmup"]["failed"] == 1 and level["warmup"]["error_samples"], level["warmup"]


def capped_in_level(case: Case, result: dict) -> None:
    (level,) = result["levels"]
    assert level["concurrency"] == 1 and level["partial"] and level["successful"] == 4


def never_started(case: Case, result: dict) -> None:
    """The held port stopped the cell before any server started. It was tried once more, 2 s later,
    on the same port (the user chose it: a holder that was just exiting would have let go), and
    the first failure stays on record."""
    (server,) = result["servers"]
    assert server["port"] == case.port and "start_error" in server and "exit" not in server, server
    assert result["levels"] == [] and not case.server_pids()
    assert "retried" in result["verdict"]["annotations"], result["verdict"]
    assert server["retried_after"].startswith(f"port {case.port} is already held by pid {os.getpid()} "), server


ALL_FAILED = r"^18/18 requests failed, mostly {} \(18x\)"
OK = r"^18/18 requests ok"
LLAMA_WORDS = "request (263 tokens) exceeds the available context size (256 tokens), try increasing it"
SHARE_FAILED = r"^6/18 requests failed \(33\.3%, 95% CI [\d.]+-[\d.]+%\), mostly http_5xx 500 \(6x\)"

FAULTS: dict[str, Fault] = {
    "ok": Fault("ok", OK, check=answered()),
    "http404": Fault("wrong-model", r"^every request answered HTTP 404: the server does not have the model"),
    "http409": Fault("wrong-model", r"^every request answered HTTP 409: the server does not have the model"),
    "models_wrong": Fault("wrong-model", rf"^/v1/models lists {OTHER_ID}, not {SERVED_ID}"),
    "responses_wrong": Fault("wrong-model", rf"^responses name {OTHER_ID}, not {SERVED_ID}"),
    "http500_html": Fault("all-failed", ALL_FAILED.format("http_5xx 500"), check=samples_say("http_5xx", "<html>")),
    "sse_not_json": Fault("all-failed", ALL_FAILED.format("invalid_sse"),
                          check=samples_say("invalid_sse", "invalid JSON")),
    "sse_error_event": Fault("all-failed", ALL_FAILED.format("stream_error_event"),
                             check=samples_say("stream_error_event", "the engine failed while generating")),
    "cut_before_finish": Fault("all-failed", ALL_FAILED.format("truncated"),
                               check=samples_say("truncated", "3 output chunks")),
    "tool_calls_only": Fault("ok", OK, check=answered()),
    "multi_token_chunks": Fault("ok", OK, annotations=("chunk-bundling", "token-accounting"),
                                check=answered(tokens_per_chunk=4.0)),
    "short_output": Fault("ok", OK, annotations=("short-output",), server_args=("--tokens", "256"),
                          sampling="{temperature: 1.0, ignore_eos: true}", check=stopped_short,
                          session_args=("--html={dir}/report.html", "--self-contained-html")),
    "no_done": Fault("ok", OK, check=answered()),
    "keepalive_comments": Fault("ok", OK, check=answered()),
    "slow_ready": Fault("ok", OK, check=ready_late),
    "fail_share": Fault("degraded", SHARE_FAILED, annotations=("uncertain",)),
    # one server per level: it dies in c=1 after the warm-up and 4 measured requests
    "exit_mid_level": Fault("failed", rf"^server exited with code {EXIT_CODE} during c=1 after \d+ of {REQUESTS} "
                            "requests", server_args=("--after", "5"), check=died_in_first_level),
    "silence_warmup": Fault("capped", r"no progress for \d+ s", hang_minutes=0.05, check=capped_in_warmup),
    "silence_level": Fault("capped", r"no progress for \d+ s.*c=1", server_args=("--after", "5"), hang_minutes=0.05,
                           check=capped_in_level),
    "big_body": Fault("all-failed", ALL_FAILED.format("invalid_sse"),
                      check=samples_say("invalid_sse", "SSE event over 16 MiB")),
    "trickle_headers": Fault("ok", r"^8/8 requests ok", requests=4, check=answered()),
    "reasoning": Fault("ok", OK, check=answered()),  # its TTFA and reasoning tokens: tests/core/test_reasoning.py
    "gzip_stream": Fault("ok", OK, annotations=("compressed",), check=decoded),
    "br_stream": Fault("all-failed", ALL_FAILED.format("invalid_sse"), check=samples_are(
        "invalid_sse", "the server compressed the stream (Content-Encoding: br), which cellbench does not decode")),
    "error_in_stream": Fault("all-failed", ALL_FAILED.format("stream_error_event") + f": HTTP 200, then an error in "
                             f"the stream: {re.escape(LLAMA_WORDS)} \\(type exceed_context_size_error, code 400\\)$"),
    "http400_openai_error": Fault("all-failed", ALL_FAILED.format("http_4xx 400") + f": HTTP 400 Bad Request: "
                                  f"{re.escape(LLAMA_WORDS)} \\(type exceed_context_size_error\\)$"),
    "http429_retry_after": Fault("all-failed", rf"^18/18 requests failed, rate-limited: HTTP 429 x 18 "
                                 rf"\(Retry-After: {RETRY_AFTER_S}\)$", check=retry_after_kept),
    HELD: Fault("failed", rf"^port {{port}} is already held by pid {os.getpid()} ", check=never_started),
}
ENDPOINT_FAULTS: dict[str, Fault] = {
    # one server for both levels: it dies in c=2, after the 14th chat request (the default --after)
    "exit_mid_level": Fault("failed", rf"^endpoint stopped answering during c=2 after \d+ of {REQUESTS} requests",
                            check=died_in_second_level),
    HELD: Fault("failed", r"^endpoint http://127\.0\.0\.1:{port} not ready on /v1/models after \d+ s",
                ready_timeout_s=3.0),
}
assert set(FAULTS) == {*MODES, HELD}, "every fault server mode has its expectation"


def expected(mode: str, form: str) -> Fault:
    return ENDPOINT_FAULTS.get(mode, FAULTS[mode]) if form == "endpoint" else FAULTS[mode]


# ------------------------------------------------------------------ running one case


def write_profile(case: Case) -> Path:
    """A profile serving `tiny`; in the command form, its server is the fault server in this mode."""
    lines = [f"name: fault-{case.mode}", f"results_name: {RESULTS_NAME}", "builtin: tiny",
             f"sampling: {case.fault.sampling}", f"formats: {{gguf: {{served_id: {SERVED_ID}}}}}"]
    if case.form == "command":
        argv = [sys.executable, "-m", "tests.support.faultserver", "--port", "{port}", "--mode",
                "ok" if case.mode == HELD else case.mode, "--tag", case.tag, *case.fault.server_args]
        lines += ["openai:", f"  command: {json.dumps(argv)}",
                  f"  env: {{PYTHONPATH: {json.dumps(str(PROJECT_ROOT))}}}", f"  served_id: {SERVED_ID}"]
    path = case.directory / f"fault-{case.mode}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


@contextlib.contextmanager
def held_port() -> Iterator[int]:
    """A port held by a plain listening socket that accepts connections and never answers them."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind((HOST, 0))
    listener.listen(16)
    listener.settimeout(0.2)
    accepted: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            with contextlib.suppress(TimeoutError):
                accepted.append(listener.accept()[0])

    thread = threading.Thread(target=accept, name="port-holder", daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        done.set()
        thread.join()
        for conn in accepted:
            conn.close()
        listener.close()


@contextlib.contextmanager
def endpoint_server(case: Case) -> Iterator[int]:
    """The fault server in its own process group on a free port; stopped by pid on the way out."""
    log_path = case.directory / "endpoint.log"
    argv = [sys.executable, "-m", "tests.support.faultserver", "--port", "0", "--mode", case.mode,
            "--tag", case.tag, *case.fault.server_args]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(argv, cwd=PROJECT_ROOT, env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield _listening_port(proc, log_path)
    finally:
        case.endpoint_exit = proc.poll()
        _stop_group(proc)


def _listening_port(proc: subprocess.Popen, log_path: Path) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"on http://127\.0\.0\.1:(\d+)", log_path.read_text(errors="replace"))
        if found:
            return int(found.group(1))
        assert proc.poll() is None, f"the fault server exited: {log_path.read_text(errors='replace')[-2000:]}"
        time.sleep(0.05)
    raise AssertionError(f"the fault server did not start within 60 s: {log_path.read_text(errors='replace')}")


def _stop_group(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM to the process group, SIGKILL after `grace_s`, and reap the leader."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def session_argv(case: Case) -> list[str]:
    """`pytest -m chat -k openai` with small levels, against the case's server (or held port)."""
    fault = case.fault
    target = [f"--endpoint=http://{HOST}:{case.port}"] if case.form == "endpoint" else ["--port", str(case.port or 0)]
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "chat", "-k", "openai",
            f"--model={write_profile(case)}", f"--results-dir={case.results}",
            "--concurrency", ",".join(map(str, LEVELS)), "--requests", str(fault.requests), "--warmup", "1",
            "--hang-minutes", f"chat={fault.hang_minutes:g}", "--request-timeout", "20",
            "--ready-timeout", f"{fault.ready_timeout_s:g}", "--progress-interval", "0", *target,
            *(arg.replace("{dir}", str(case.directory)) for arg in fault.session_args)]


def run_case(case: Case, sessions: dict[str, subprocess.Popen], lock: threading.Lock) -> Case:
    """One real pytest session of the cell against this case's server; its own cache (so its own
    host lock) and results directory."""
    case.directory.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        if case.mode == HELD:
            case.port = stack.enter_context(held_port())
        elif case.form == "endpoint":
            case.port = stack.enter_context(endpoint_server(case))
        env = {**os.environ, "CELLBENCH_CACHE": str(case.directory / "cache"), JOURNAL_DAY_ENV: case.day}
        proc = subprocess.Popen(session_argv(case), cwd=PROJECT_ROOT, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        with lock:
            sessions[case.tag] = proc
        try:
            case.output, _ = proc.communicate(timeout=SESSION_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _stop_group(proc)
            case.output = (proc.stdout.read() if proc.stdout else "") + f"\n[killed after {SESSION_TIMEOUT_S:g} s]"
        finally:
            with lock:
                sessions.pop(case.tag, None)
        case.returncode = proc.returncode
    return case


class Matrix:
    """Runs the selected cases' sessions JOBS at a time; `outcome(mode, form)` waits for one."""

    def __init__(self, root: Path):
        self.root = root
        self.pool = ThreadPoolExecutor(max_workers=JOBS, thread_name_prefix="fault-case")
        self.futures: dict[tuple[str, str], Future[Case]] = {}
        self.tags: set[str] = set()
        self.sessions: dict[str, subprocess.Popen] = {}
        self.lock = threading.Lock()

    def submit(self, cases: list[tuple[str, str]]) -> None:
        for mode, form in cases:
            if (mode, form) not in self.futures:
                case = Case(mode, form, self.root / f"{mode}-{form}")
                self.tags.add(case.tag)
                self.futures[mode, form] = self.pool.submit(run_case, case, self.sessions, self.lock)

    def outcome(self, mode: str, form: str) -> Case:
        self.submit([(mode, form)])
        return self.futures[mode, form].result()

    def close(self) -> None:
        """Drop the cases not started, stop the sessions still running (an interrupted run), and
        kill whatever a case left behind, once its test has seen it."""
        self.pool.shutdown(wait=False, cancel_futures=True)
        with self.lock:
            running = list(self.sessions.values())
        for proc in running:
            _stop_group(proc)
        self.pool.shutdown(wait=True)
        for leftover in tagged_processes(self.tags):
            with contextlib.suppress(psutil.Error):
                leftover.kill()


CASES = [(mode, form) for mode in [*MODES, HELD] for form in FORMS]


@pytest.fixture(scope="module")
def matrix(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Matrix]:
    """The cases this session selected, started at once. An xdist worker runs only the tests it is
    handed, which it cannot know in advance: there each test starts its own case."""
    selected = [item.callspec.params["case"] for item in request.session.items
                if getattr(item, "module", None) is request.module and hasattr(item, "callspec")]
    if hasattr(request.config, "workerinput"):
        selected = []
    runner = Matrix(tmp_path_factory.mktemp("faults"))
    runner.submit(selected)
    try:
        yield runner
    finally:
        runner.close()


# ------------------------------------------------------------------ the checks


def check_verdict(case: Case, result: dict) -> None:
    fault = case.fault
    verdict = result["verdict"]
    got = f"got {verdict['verdict']}: {verdict['reason']}\n{case.tail()}"
    # A starved or saturated client makes an ok cell `degraded`: the host's load, not the server,
    # so an ok mode accepts it (with a warning) and still checks the answers (tests/support/busy.py).
    if fault.verdict == "ok" and client_limited(verdict):
        warnings.warn(f"{case.mode}-{case.form}: the client, not the server, limited this run: {verdict['reason']}",
                      stacklevel=2)
    else:
        assert verdict["verdict"] == fault.verdict, got
        assert re.search(fault.reason.replace("{port}", str(case.port)), verdict["reason"]), got
    assert set(fault.annotations) <= set(verdict["annotations"]), got
    failing = verdict["verdict"] in FAILURE_VERDICTS
    assert case.returncode == (1 if failing else 0), got


def check_error_samples(result: dict) -> None:
    """Every error sample, measured or warm-up, has a known type and says what happened."""
    known = {t.value for t in ErrorType}
    blocks = [block for lv in result["levels"] for block in (lv, lv.get("warmup") or {})]
    for block in blocks:
        for kind, samples in (block.get("error_samples") or {}).items():
            assert kind in known, kind
            for sample in samples:
                assert isinstance(sample["message"], str) and sample["message"].strip(), sample


def check_journal(case: Case, result: dict) -> None:
    """The day's journal (markdown and its JSON twin) has the cell with the result's verdict."""
    states = sorted(case.results.glob(f"{RESULTS_NAME}/*/weekly_{case.day}.journal.json"))
    assert len(states) == 1, f"expected one journal, found {states}"
    cells = json.loads(states[0].read_text())["cells"]
    verdict = result["verdict"]["verdict"]
    entries = [c for c in cells if (c["framework"], c["split"]) == ("openai", "chat")]
    assert [(e["verdict"], e["reason"]) for e in entries] == [(verdict, result["verdict"]["reason"])]
    markdown = states[0].with_suffix(".md").read_text()
    assert f"| openai | {verdict} |" in markdown
    if verdict in JOURNAL_FAILURES:  # with its reason whole: the server's words, where it said any
        failures = markdown.split("## Failures", 1)[1]
        assert f"### openai / chat: {verdict}\n- Reason: {result['verdict']['reason']}\n" in failures


def tagged_processes(tags: set[str]) -> list[psutil.Process]:
    """Live processes whose command line carries one of `tags` (every fault server of a case has its tag)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        argv = proc.info["cmdline"] or ()
        if proc.info["status"] != psutil.STATUS_ZOMBIE and any(arg in tags for arg in argv):
            found.append(proc)
    return found


def check_nothing_left(case: Case) -> None:
    """No process of this case is running: the session, its servers, the endpoint's server."""
    assert case.returncode is not None
    left = [f"pid {proc.pid}: {' '.join(proc.info['cmdline'])}" for proc in tagged_processes({case.tag})]
    for pid in case.server_pids():
        with contextlib.suppress(psutil.NoSuchProcess):
            proc = psutil.Process(pid)
            if proc.status() != psutil.STATUS_ZOMBIE and "faultserver" in " ".join(proc.cmdline()):
                left.append(f"pid {pid}: a fault server")
    assert not left, left


@pytest.mark.parametrize("case", CASES, ids=[f"{mode}-{form}" for mode, form in CASES])
def test_fault(case: tuple[str, str], matrix: Matrix) -> None:
    run = matrix.outcome(*case)
    check_nothing_left(run)
    result = run.result()
    check_verdict(run, result)
    check_error_samples(result)
    if run.fault.check is not None:
        run.fault.check(run, result)
    check_journal(run, result)
