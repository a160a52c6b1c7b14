"""CPU placement (--client-cpus / --server-cpus) and the CPU evidence a level records.

The placement rules are pinned on given CPU sets; the pinning itself is checked on real
processes: this one's threads, a server child started through `ServerProcess` and the process it
starts in turn, and a whole pytest session whose server reports the CPUs it was allowed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from bench.base.paths import PROJECT_ROOT
from bench.core.result.files import validate
from bench.host.cpus import placement, usage
from bench.host.cpus.placement import AffinityError, Placement
from bench.host.cpus.usage import CpuSample
from bench.host.ports import free_port
from bench.run.server.process import ServerProcess
from bench.setup.adapter import ServeCommand
from tests.support.busy import HOST_LOCK_WAIT_S

linux_only = pytest.mark.skipif(not placement.supported(), reason="CPU affinity is a Linux API")


def two_cpus() -> tuple[int, int]:
    usable = placement.usable_cpus()
    if len(usable) < 2:
        pytest.skip("pinning needs two usable CPUs to be visible")
    return usable[0], usable[-1]


# ------------------------------------------------------------------ CPU lists


@pytest.mark.parametrize("text, cpus", [("3", (3,)), ("0-2", (0, 1, 2)), ("0,2-3", (0, 2, 3)), (" 1 , 1 ", (1,))])
def test_cpu_lists_read_as_taskset_reads_them(text, cpus):
    assert placement.parse_cpus(text) == cpus
    assert placement.parse_cpus(placement.format_cpus(cpus)) == cpus


@pytest.mark.parametrize("text", ["", "a", "3-1", "-1", "1,,2", "0-"])
def test_bad_cpu_lists_say_what_a_list_looks_like(text):
    with pytest.raises(AffinityError, match="not a CPU list"):
        placement.parse_cpus(text)


def test_format_cpus_folds_runs():
    assert placement.format_cpus([5, 0, 1, 2]) == "0-2,5"


# ------------------------------------------------------------------ placement rules

EIGHT = tuple(range(8))


@pytest.fixture
def linux(monkeypatch):
    """Placement rules as on Linux, whatever this host is (resolve only checks lists against `cpus`)."""
    monkeypatch.setattr(placement, "supported", lambda: True)


@pytest.mark.usefixtures("linux")
class TestResolve:
    def test_auto_on_a_cpu_host_gives_the_client_the_last_cpu(self):
        placed = placement.resolve("auto", "auto", cpus=(0, 1, 2, 3))
        assert (placed.client, placed.server) == ((3,), (0, 1, 2))
        assert placed.how == "auto: client on CPU 3, server on CPUs 0-2"

    @pytest.mark.parametrize("cpus, why", [((0, 1), "off with 2 CPUs"), ((0, 1, 2), "off with 3 CPUs")])
    def test_auto_stays_off_where_a_cpu_is_a_big_share_of_the_server(self, cpus, why):
        placed = placement.resolve("auto", "auto", cpus=cpus)
        assert placed.client is None and placed.server is None
        assert why in placed.how and "--client-cpus" in placed.how

    def test_auto_stays_off_on_a_gpu_host_and_for_an_endpoint(self):
        assert placement.resolve("auto", "auto", gpu=True, cpus=EIGHT) == Placement(how="auto: off on a GPU host")
        placed = placement.resolve("auto", "auto", endpoint=True, cpus=EIGHT)
        assert placed.client is None and "--endpoint" in placed.how

    def test_an_explicit_side_leaves_the_rest_to_the_auto_side(self):
        assert placement.resolve("1", "auto", cpus=(0, 1)) == Placement((1,), (0,), "explicit")
        assert placement.resolve("auto", "0-5", cpus=EIGHT) == Placement((6, 7), (0, 1, 2, 3, 4, 5), "explicit")
        assert placement.resolve("7", "0-3", cpus=EIGHT) == Placement((7,), (0, 1, 2, 3), "explicit")

    def test_off_is_off(self):
        assert placement.resolve("off", "auto", cpus=EIGHT) == Placement(how="off")
        assert placement.resolve("2", "off", cpus=EIGHT) == Placement((2,), None, "explicit")

    def test_with_an_endpoint_only_the_client_is_placed(self):
        assert placement.resolve("3", "auto", endpoint=True, cpus=EIGHT) == Placement((3,), None, "explicit")
        with pytest.raises(AffinityError, match="--server-cpus pins a server cellbench starts"):
            placement.resolve("auto", "0", endpoint=True, cpus=EIGHT)

    def test_cpus_this_process_cannot_use_are_named(self):
        with pytest.raises(AffinityError, match=r"--client-cpus 9: CPU 9 is not available .*usable: 0-7"):
            placement.resolve("9", "auto", cpus=EIGHT)

    def test_nothing_left_for_the_auto_side_is_an_error(self):
        with pytest.raises(AffinityError, match="--server-cpus auto: the other side takes every usable CPU"):
            placement.resolve("0-7", "auto", cpus=EIGHT)


def test_without_an_affinity_api_lists_are_refused_and_auto_is_off(monkeypatch):
    monkeypatch.setattr(placement, "supported", lambda: False)
    monkeypatch.setattr(placement.platform, "system", lambda: "Darwin")
    with pytest.raises(AffinityError, match="--client-cpus: Darwin has no CPU affinity API; only auto or off"):
        placement.resolve("1", "auto", cpus=EIGHT)
    placed = placement.resolve("auto", "auto", cpus=EIGHT)
    assert placed.client is None and placed.server is None and "no CPU affinity API" in placed.how


# ------------------------------------------------------------------ evidence


def test_two_samples_say_how_the_phase_used_the_cpus():
    """Over 2 s: the process used 0.2 CPU-s; CPU 0 was fully busy, CPU 1 (the client's) 90%;
    the loop thread waited 0.4 s for a CPU and was preempted 15 times."""
    first = CpuSample(wall=10.0, process_cpu_s=1.0, cpu_busy_s={0: (100.0, 200.0), 1: (50.0, 200.0)}, cpus=(1,),
                      run_delay_s=0.5, involuntary_switches=10, pressure_some_s=3.0)
    last = CpuSample(wall=12.0, process_cpu_s=1.2, cpu_busy_s={0: (102.0, 202.0), 1: (51.8, 202.0)}, cpus=(1,),
                     run_delay_s=0.9, involuntary_switches=25, pressure_some_s=4.5)
    use = usage.between(first, last)
    assert use.cpu_share == pytest.approx(0.1)
    assert (use.host_cpus, use.client_cpus) == (2, (1,))
    assert use.host_busy == pytest.approx(1.9) and use.client_cpus_busy == pytest.approx(0.9)
    assert use.run_queue_wait_share == pytest.approx(0.2) and use.involuntary_switches == 15
    assert use.cpu_pressure_some == pytest.approx(0.75)


def test_evidence_a_host_does_not_offer_stays_unknown():
    first = CpuSample(1.0, 0.0, {}, None, None, None, None)
    use = usage.between(first, replace(first, wall=2.0, process_cpu_s=0.5))
    assert use.cpu_share == pytest.approx(0.5)
    assert (use.host_busy, use.client_cpus_busy, use.run_queue_wait_share, use.involuntary_switches,
            use.cpu_pressure_some) == (None, None, None, None, None)


@linux_only
def test_a_sample_sees_this_hosts_cpus_and_thread():
    snap = usage.sample()
    assert set(placement.usable_cpus()) <= set(snap.cpu_busy_s) and snap.cpus == placement.usable_cpus()
    assert all(0 <= busy <= total for busy, total in snap.cpu_busy_s.values())
    if Path("/proc/thread-self/schedstat").exists():
        assert snap.run_delay_s is not None and snap.involuntary_switches is not None


# ------------------------------------------------------------------ pinning real processes


@linux_only
def test_pinned_moves_every_thread_and_gives_each_its_mask_back():
    _, last = two_cpus()
    before = os.sched_getaffinity(0)
    seen: dict[str, set[int]] = {}
    go, stop = threading.Event(), threading.Event()

    def background() -> None:  # a thread that exists before the block, like the resource sampler
        go.wait(10)
        seen["thread inside"] = os.sched_getaffinity(0)
        stop.wait(10)
        seen["thread after"] = os.sched_getaffinity(0)

    thread = threading.Thread(target=background)
    thread.start()
    try:
        with placement.pinned((last,)) as cpus:
            assert cpus == (last,) and os.sched_getaffinity(0) == {last}
            go.set()
            time.sleep(0.1)
        stop.set()
    finally:
        go.set()
        stop.set()
        thread.join(10)
    assert seen == {"thread inside": {last}, "thread after": before}
    assert os.sched_getaffinity(0) == before


@linux_only
def test_a_server_started_on_cpus_passes_them_to_the_process_it_starts(tmp_path):
    """ServerProcess.start with ServeCommand.cpus: the server and its child both run on them,
    and the starting thread keeps its own mask."""
    first, _ = two_cpus()
    report = tmp_path / "cpus.json"
    child = "import os, time; time.sleep(30)"
    script = (f"import json, os, subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', {child!r}]); "
              f"time.sleep(0.2); json.dump({{'self': sorted(os.sched_getaffinity(0)), "
              f"'child': sorted(os.sched_getaffinity(c.pid))}}, open({str(report)!r}, 'w')); c.wait()")
    before = os.sched_getaffinity(0)
    server = ServerProcess(ServeCommand([sys.executable, "-c", script], cpus=(first,)), host="127.0.0.1",
                           port=free_port(), ready_path="/", startup_timeout_s=10, log_path=tmp_path / "server.log")
    server.start()
    try:
        assert os.sched_getaffinity(0) == before
        assert os.sched_getaffinity(server.proc.pid) == {first}
        deadline = time.monotonic() + 20
        while not report.exists() or not report.read_text():
            assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()
            time.sleep(0.05)
        assert json.loads(report.read_text()) == {"self": [first], "child": [first]}
    finally:
        server.stop(grace_s=2)
    assert f"# CPU affinity {first}" in (tmp_path / "server.log").read_text()


@linux_only
def test_a_cpu_the_server_cannot_have_is_a_start_failure(tmp_path):
    from bench.run.server.exits import ServerStartError

    missing = max(placement.usable_cpus()) + 4096
    server = ServerProcess(ServeCommand([sys.executable, "-c", "pass"], cpus=(missing,)), host="127.0.0.1",
                           port=free_port(), ready_path="/", startup_timeout_s=10, log_path=tmp_path / "server.log")
    with pytest.raises(ServerStartError, match=f"cannot run on CPUs {missing}"):
        server.start()
    assert server.proc is None


PROFILE = """\
name: tiny-fault
results_name: tiny-fault
builtin: tiny
formats:
  gguf: {{served_id: tiny}}
openai:
  command: [/bin/sh, -c, 'grep Cpus_allowed_list /proc/self/status; exec "$0" -m tests.support.faultserver --port {{port}} --mode ok', {python}]
"""  # noqa: E501 (a profile line, kept whole)


@pytest.mark.timeout(1900)  # waits up to 1500 s for another session's host lock
@pytest.mark.integration
@linux_only
def test_a_session_pins_the_server_and_the_client_where_asked(tmp_path):
    """A real pytest session with --server-cpus and --client-cpus: the server (and a process it
    starts, here `grep`) sees only its CPU, every level ran its client on the other one, and the
    result records both."""
    server_cpu, client_cpu = two_cpus()
    profile = tmp_path / "tiny-fault.yaml"
    profile.write_text(PROFILE.format(python=sys.executable))
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "chat", "-k", "openai",
           f"--model={profile}", f"--results-dir={tmp_path / 'results'}", "--requests", "3", "--warmup", "1",
           "--concurrency", "1,2", "--server-cpus", str(server_cpu), "--client-cpus", str(client_cpu),
           "--host-lock-timeout", str(HOST_LOCK_WAIT_S)]
    out = subprocess.run(cmd, check=False, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=1800)
    (path,) = (tmp_path / "results").rglob("openai_*.json")
    result = json.loads(path.read_text())
    validate(result)
    assert result["run_config"]["cpu_affinity"] == {"client": [client_cpu], "server": [server_cpu],
                                                     "how": "explicit"}, out.stdout[-2000:]
    assert [s["command"]["cpus"] for s in result["servers"]] == [[server_cpu], [server_cpu]]
    for server in result["servers"]:
        assert f"Cpus_allowed_list:\t{server_cpu}\n" in Path(server["log"]).read_text()
    assert [(lv["client"]["pinned"], lv["client"]["cpus"]) for lv in result["levels"]] == [(True, [client_cpu])] * 2


@pytest.mark.parametrize(
    "args, message",
    [
        (["--client-cpus", "x"], "*--client-cpus: not a CPU list: 'x'*"),
        (["--server-cpus", "4096"], "*--server-cpus 4096: CPU 4096 is not available to this process*"),
        (["--endpoint", "http://127.0.0.1:9", "--server-cpus", "0"], "*an --endpoint server is not ours*"),
    ],
)
@linux_only
def test_cpu_options_that_cannot_apply_are_usage_errors(pytester: pytest.Pytester, args, message):
    pytester.makepyfile(test_nothing="def test_nothing(): pass\n")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
