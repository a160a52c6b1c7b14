"""OOM evidence and memory limits on real processes: a real kernel OOM kill in a real cgroup.

The OOM tests need a memory cgroup we may create (root, or a delegated cgroup2 with the memory
controller); they skip naming what is missing only where the machine does not allow it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from bench.host.memory import jetsam, kernel_log, memlimit, oom
from bench.host.memory.memlimit import MemoryLimitUnavailable, format_size, parse_size

# Allocates 512 MiB and touches it page by page, so the pages are really charged.
HOG = textwrap.dedent(
    """
    import sys
    b = bytearray(512 << 20)
    for i in range(0, len(b), 4096):
        b[i] = 1
    print("survived 512 MiB", flush=True)
    """
)

needs_cgroup = pytest.mark.skipif(
    memlimit.unavailable() is not None, reason=f"memory cgroups unavailable: {memlimit.unavailable()}"
)


@pytest.fixture
def cgroup():
    made = []

    def make(limit: int) -> memlimit.MemoryCgroup:
        made.append(memlimit.create(limit))
        return made[-1]

    yield make
    for cg in made:
        cg.kill_all()
        assert cg.remove(), f"{cg.path} left behind"


# --- sizes ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("512M", 512 << 20),
        ("2G", 2 << 30),
        ("1.5GiB", 3 << 29),
        ("64k", 64 << 10),
        ("2gb", 2 << 30),
        ("1048576", 1 << 20),
        (" 100 MiB ", 100 << 20),
        (4096, 4096),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "lots", "-1G", "0", "1.5.2G", "12X", "GiB", "12iB"])
def test_parse_size_rejects_nonsense(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_format_size():
    assert format_size(64 << 20) == "64 MiB" and format_size(3 << 29) == "1.50 GiB" and format_size(10) == "10 B"


# --- the real thing ------------------------------------------------------------------------------


@needs_cgroup
def test_real_oom_kill_in_a_memory_cgroup(cgroup):
    cg = cgroup(64 << 20)
    assert cg.oom_kills() == 0
    if cg.version == 1:
        assert int((cg.path / "memory.limit_in_bytes").read_text()) == 64 << 20
        memsw = cg.path / "memory.memsw.limit_in_bytes"
        if memsw.exists():
            assert int(memsw.read_text()) == 64 << 20, "swap cannot dodge the limit"
    proc = subprocess.Popen(cg.wrap([sys.executable, "-c", HOG]), stdout=subprocess.PIPE, text=True)
    watch = oom.OomWatch(proc.pid, cg)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL and "survived" not in out

    t0 = time.monotonic()
    evidence = watch.detect(proc.returncode)
    took = time.monotonic() - t0
    assert evidence is not None, "a real OOM kill must be detected"
    assert evidence["source"] == "cgroup oom_kill"
    assert evidence["pid"] == proc.pid and evidence["signal"] == "SIGKILL"
    assert evidence["cgroup"]["oom_kill"] >= 1 and evidence["cgroup"]["limit_bytes"] == 64 << 20
    _, log_error = kernel_log.read_kernel_log()
    if log_error is None:  # root on Linux: the kernel's own words are in the evidence
        assert f"Killed process {proc.pid} (" in evidence["line"]
        assert "out of memory" in evidence["line"].lower()
        assert any(f"pid={proc.pid}," in line for line in evidence["lines"])
    assert took < 2.0, f"detection took {took:.2f} s"
    assert "killed for memory" in oom.describe_oom(evidence)


@needs_cgroup
def test_the_limit_applies_from_the_first_byte(cgroup):
    cg = cgroup(256 << 20)
    probe = "print(open('/proc/self/cgroup').read())"
    out = subprocess.run(cg.wrap([sys.executable, "-c", probe]), capture_output=True, text=True, check=True).stdout
    assert cg.relpath in out, "the process was inside its cgroup before running a line of its own"


@needs_cgroup
def test_wrap_fails_like_popen_for_a_missing_executable(cgroup):
    cg = cgroup(64 << 20)
    with pytest.raises(FileNotFoundError):
        cg.wrap(["no-such-server-binary", "--port", "1"])


def test_our_own_sigkill_is_not_an_oom():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    watch = oom.OomWatch(proc.pid)
    time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL
    assert watch.detect(proc.returncode, killed_by_us=True) is None
    # Even blamed on no one, a SIGKILL with nothing from the kernel is no evidence of an OOM.
    if kernel_log.read_kernel_log()[1] is None:
        assert watch.detect(proc.returncode, killed_by_us=False) is None


def test_exit_1_is_not_an_oom():
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(1)"])
    watch = oom.OomWatch(proc.pid)
    assert proc.wait(timeout=10) == 1
    assert watch.detect(1) is None


# --- when detection cannot answer: recorded, never an OOM and never "no OOM" ---------------------


@pytest.fixture
def blind(monkeypatch):
    """A Linux host where neither the kernel log nor /proc/vmstat can be read."""
    monkeypatch.setattr(oom.sys, "platform", "linux")
    monkeypatch.setattr(oom, "read_kernel_log", lambda: ([], "cannot read /dev/kmsg: Operation not permitted"))
    monkeypatch.setattr(oom, "vmstat_oom_kills", lambda: None)


def _detect(returncode, *, killed_by_us=False, vmstat_before=None):
    return oom.detect_oom(1234, started_monotonic=time.monotonic(), returncode=returncode,
                          killed_by_us=killed_by_us, vmstat_before=vmstat_before)


def test_an_unexplained_sigkill_with_nothing_readable_is_undecided(blind):
    with pytest.raises(oom.OomUndecided, match="kernel log was not readable.*Operation not permitted"):
        _detect(-signal.SIGKILL, vmstat_before=5)
    assert _detect(-signal.SIGKILL, killed_by_us=True) is None, "our own SIGKILL needs no evidence"
    assert _detect(1) is None, "an exit 1 is a crash, not a question for the OOM killer"


def test_a_still_counter_clears_an_unexplained_sigkill(monkeypatch):
    monkeypatch.setattr(oom.sys, "platform", "linux")
    monkeypatch.setattr(oom, "read_kernel_log", lambda: ([], "cannot read /dev/kmsg"))
    monkeypatch.setattr(oom, "vmstat_oom_kills", lambda: 7)
    assert _detect(-signal.SIGKILL, vmstat_before=7) is None
    assert _detect(-signal.SIGKILL, vmstat_before=6)["source"] == "vmstat oom_kill"


def test_an_unreadable_unified_log_leaves_a_jetsam_kill_undecided(monkeypatch):
    monkeypatch.setattr(oom, "jetsam_kills", lambda since: ([], "log show: exit code 1"))
    with pytest.raises(oom.OomUndecided, match="unified log was not readable \\(log show: exit code 1\\)"):
        oom._detect_jetsam(1234, {1234: ""}, -signal.SIGKILL, time.time(), killed_by_us=False)
    assert oom._detect_jetsam(1234, {1234: ""}, 1, time.time(), killed_by_us=False) is None


def _server(tmp_path, code: str):
    from bench.host.ports import free_port
    from bench.run.server.process import ServerProcess
    from bench.setup.adapter import ServeCommand

    return ServerProcess(ServeCommand([sys.executable, "-c", code]), host="127.0.0.1", port=free_port(),
                         ready_path="/", startup_timeout_s=30, log_path=tmp_path / "server.log")


def test_a_server_that_died_undecided_records_why_and_is_not_an_oom(tmp_path, blind):
    server = _server(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    server.start()
    assert server.proc.wait(timeout=30) == -signal.SIGKILL
    exit_info = server.stop()
    assert exit_info.oom is None and exit_info.signal == "SIGKILL"
    assert server.oom_check_error.startswith("OomUndecided: died of a SIGKILL nobody here sent")
    assert exit_info.to_json()["oom_check_error"] == server.oom_check_error


def test_a_failing_detector_is_recorded_not_swallowed(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise PermissionError(13, "Permission denied", "/sys/fs/cgroup/memory/x/memory.oom_control")

    monkeypatch.setattr(oom, "detect_oom", broken)
    server = _server(tmp_path, "import sys; sys.exit(3)")
    server.start()
    assert server.proc.wait(timeout=30) == 3
    exit_info = server.stop()
    assert exit_info.oom is None and exit_info.returncode == 3, "how the server ended is kept"
    assert server.oom_check_error == (
        "PermissionError: [Errno 13] Permission denied: '/sys/fs/cgroup/memory/x/memory.oom_control'")


# --- the kernel log, as this machine writes it (Linux 6.18, cgroup v1, recorded 2025) ------------

RECORDED = [
    (9587.143300, "[  18244]     0 18244   135214    17976    16288     1688         0   196608        0             0 python3"),  # noqa: E501 (data: one row, as written)
    (9587.143304, ("oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
                   "oom_memcg=/process_api/3baf/cellbench-17377-1,task_memcg=/process_api/3baf/cellbench-17377-1,"
                   "task=python3,pid=18244,uid=0")),
    (9587.143319, ("Memory cgroup out of memory: Killed process 18244 (python3) total-vm:540856kB, "
                   "anon-rss:65152kB, file-rss:6752kB, shmem-rss:0kB, UID:0 pgtables:192kB oom_score_adj:0")),
    (9587.150000, "oom_reaper: reaped process 18244 (python3), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB"),
    # a global OOM kill of somebody else's process
    (9590.000000, "Out of memory: Killed process 4242 (llama-server) total-vm:1kB, anon-rss:1kB"),
]
LINES = [kernel_log.KernelLine(t, text) for t, text in RECORDED]


def test_kernel_kills_by_pid_of_the_tree():
    kills = kernel_log.kernel_kills(LINES, pids=[1, 18244], since=9000.0)
    assert [k.pid for k in kills] == [18244]
    kill = kills[0]
    assert kill.process == "python3" and kill.line.startswith("Memory cgroup out of memory: Killed process 18244")
    assert len(kill.lines) == 3 and kill.memcg == "/process_api/3baf/cellbench-17377-1"


def test_kernel_kills_by_cgroup_when_the_pid_was_never_seen():
    kills = kernel_log.kernel_kills(LINES, pids=[], memcg="/process_api/3baf/cellbench-17377-1")
    assert [k.pid for k in kills] == [18244] and kills[0].line is not None


def test_kernel_kills_ignore_reports_from_before_the_start():
    assert [k.pid for k in kernel_log.kernel_kills(LINES, pids=[18244, 4242], since=9590.0)] == [4242]
    assert [k.pid for k in kernel_log.kernel_kills(LINES, pids=[18244, 4242], since=9600.0)] == []


def test_global_oom_line_for_another_process_is_not_ours():
    assert kernel_log.kernel_kills(LINES, pids=[4243]) == []


def test_kernel_log_is_readable_as_root():
    if os.geteuid() != 0 or not sys.platform.startswith("linux"):
        pytest.skip("reading the kernel log needs root (CAP_SYSLOG) on Linux")
    lines, why = kernel_log.read_kernel_log()
    assert why is None and lines and all(isinstance(kl.text, str) for kl in lines)


# --- macOS jetsam: the parser only --------------------------------------------------------------
# No Mac ran this. The shapes are the ones published from real devices (an iOS syslog quoted in
# getlantern/lantern#8971, the Console line quoted in public iOS OOM write-ups) and xnu's own
# `memorystatus: killing_specific_process pid %d [%s] (%s %d) ...` format string, set in
# `log show --style default` framing. Re-record on a Mac before trusting it there.

JETSAM_SAMPLE = """\
Timestamp                       Thread     Type        Activity             PID    TTL
2025-03-01 10:23:45.123456-0800 0x1a2b     Default     0x0                  0      0    kernel: memorystatus: llama-server [5120] exceeded mem limit: ActiveHard 6144 MB (fatal)
2025-03-01 10:23:45.124001-0800 0x1a2b     Default     0x0                  0      0    kernel: memorystatus: killing_specific_process pid 5120 [llama-server] (per-process-limit 3) 6291461KB - memorystatus_available_pages: 42102
2025-03-01 10:23:45.130000-0800 0x88       Default     0x0                  311    0    ReportCrash: ReportSystemMemory: Process llama-server [5120] killed by jetsam reason per-process-limit
2025-03-01 10:24:01.000000-0800 0x1a2b     Default     0x0                  0      0    kernel: memorystatus: killing_top_process pid 777 [Python] (vm-pageshortage 1) 1234KB - memorystatus_available_pages: 1200
2025-03-01 10:24:02.000000-0800 0x1a2b     Default     0x0                  0      0    kernel: memorystatus: killing_highwater_process [com.apple.WebKit.WebContent] (highwater 100 17s) 8579568KB
"""  # noqa: E501 (recorded lines, kept whole)


def test_parse_jetsam_lines():
    kills = jetsam.parse_jetsam(JETSAM_SAMPLE)
    assert [(k.pid, k.process) for k in kills] == [
        (5120, "llama-server"), (5120, "llama-server"), (5120, "llama-server"), (777, "Python")
    ], "a line without a pid names no process of ours"
    assert kills[1].reason == "per-process-limit" and kills[2].reason == "per-process-limit"
    assert kills[3].reason == "vm-pageshortage"
    assert kills[0].reason.startswith("per-process-limit (ActiveHard 6144 MB")
    assert kills[2].wall == pytest.approx(1740853425.13, abs=0.01)
    assert "killed by jetsam reason" in kills[2].line


def test_describe_quotes_the_kernel_line():
    evidence = {"source": "kernel log", "pid": 7, "process": "vllm", "line": "Out of memory: Killed process 7 (vllm)"}
    assert oom.describe_oom(evidence) == "killed for memory (kernel log): Out of memory: Killed process 7 (vllm)"
    no_line = {"source": "cgroup oom_kill", "pid": 7, "process": None, "cgroup": {"limit_bytes": 1 << 30}}
    assert oom.describe_oom(no_line) == "pid 7 killed for memory (cgroup oom_kill, limit 1 GiB)"


# --- when the machine does not allow it ---------------------------------------------------------


def test_not_root_gets_a_reason_naming_what_is_missing():
    if os.geteuid() != 0:
        reason = memlimit.unavailable()
        if reason is None:
            pytest.skip("this unprivileged user has a delegated memory cgroup")
        with pytest.raises(MemoryLimitUnavailable, match="cannot enforce a memory limit"):
            memlimit.create(64 << 20)
        return
    # As root, ask as `nobody`. The clone may live where `nobody` cannot enter (/root, a 0700
    # folder), so the child imports a copy of bench.host.memory.memlimit (standard library only) from a
    # folder it can read.
    python = "/usr/bin/python3"
    if not os.access(python, os.X_OK):
        pytest.skip("no interpreter the nobody user can run")
    probe = (
        "import memlimit as m\n"
        "try:\n    m.create(64 << 20)\nexcept m.MemoryLimitUnavailable as exc:\n    print('UNAVAILABLE', exc)\n"
        "else:\n    print('CREATED')\n"
    )
    readable = Path(tempfile.mkdtemp(prefix="cellbench-nobody-"))
    try:
        readable.chmod(0o755)
        copy = readable / "memlimit.py"
        shutil.copyfile(memlimit.__file__, copy)
        copy.chmod(0o644)
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(readable), "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run([python, "-c", probe], check=False, capture_output=True, text=True, user=65534,
                              group=65534, cwd="/", env=env, timeout=30)
    finally:
        shutil.rmtree(readable, ignore_errors=True)
    assert done.stdout.startswith("UNAVAILABLE cannot enforce a memory limit:"), done.stdout + done.stderr
    assert "uid 65534" in done.stdout or "not writable" in done.stdout


def test_v2_needs_the_memory_controller_delegated(tmp_path):
    mount = memlimit._Mount(2, tmp_path, "/")
    (tmp_path / "svc").mkdir()
    (tmp_path / "svc" / "cgroup.subtree_control").write_text("cpu io\n")
    why = memlimit._v2_parent(mount, "/svc")
    assert isinstance(why, str) and "memory controller is not delegated" in why
    (tmp_path / "svc" / "cgroup.subtree_control").write_text("cpu io memory\n")
    assert memlimit._v2_parent(mount, "/svc") == (tmp_path / "svc", "/svc")
    assert "no cgroup2 mount" in memlimit._v2_parent(None, "/svc")


def test_mountinfo_and_own_cgroup_parsing(tmp_path):
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
    )
    v1, v2 = memlimit._mounts(mountinfo)
    assert v1.mountpoint == Path("/sys/fs/cgroup/memory") and v2.mountpoint == Path("/sys/fs/cgroup/unified")
    cgroup = tmp_path / "cgroup"
    cgroup.write_text("4:memory:/process_api/abc\n3:cpuset:/\n0::/\n")
    assert memlimit._own_cgroups(cgroup) == ("/process_api/abc", "/")


@needs_cgroup
def test_reap_stale_removes_only_empty_cgroups_of_dead_owners(cgroup):
    live = cgroup(64 << 20)  # ours: the owner (this process) is alive
    parent = live.path.parent
    # Every cellbench session reaps at its start, so one that another test (on the other xdist
    # worker) starts in between may reap the stale cgroup first: then it is gone, and the test
    # makes another, until this call is the one that reaps it (three tries).
    reaped_here = False
    for _ in range(3):
        dead_owner = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                                    capture_output=True, text=True, check=True)
        stale = parent / f"{memlimit.PREFIX}{int(dead_owner.stdout)}-1"
        stale.mkdir()
        try:
            removed = memlimit.reap_stale()
            assert not stale.exists() and live.path.exists()
            assert all(Path(p).name.startswith(memlimit.PREFIX) and p != str(live.path) for p in removed)
            if str(stale) in removed:
                reaped_here = True
                break
        finally:
            if stale.exists():
                stale.rmdir()
    assert reaped_here, "another session reaped each of three stale cgroups first"
