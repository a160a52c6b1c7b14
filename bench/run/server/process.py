"""Start, check and stop one inference server process, never leaking it.

- the port is checked free before start, so a stale server still holding it cannot make a failed
  start look ready: a held port is a start failure naming the holder (bench.host.ports);
- the server runs in its own process group (vLLM and wrappers fork children) and is stopped by
  SIGTERM to the group, a bounded wait, then SIGKILL;
- readiness polls the adapter's endpoint (with the API key, when there is one) and fails fast when
  the process exits or the ready path answers 401/403 (a key it wants); a timeout names the last
  answer; after "ready", the listening socket must belong to our process tree (bench.run.server.ready);
- every started group is recorded in a pid file under the cache, so a later session can reap
  what a hard-killed session left behind (bench.host.process_groups);
- with `memory_limit_bytes` the server runs inside a fresh memory cgroup (bench.host.memory.memlimit) from
  its first byte; a machine that cannot enforce the limit fails the start with the reason, and
  the cgroup is removed once the server's processes are gone;
- whenever the server ends, and when it dies while starting, the kernel is asked whether it was
  killed for memory (bench.host.memory.oom): `ExitInfo.oom` / `ServerStartError.oom` carry the evidence.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil

from bench.base.exits import signal_name
from bench.core.result.model import ServerOverhead
from bench.host.cpus import placement
from bench.host.memory import memlimit
from bench.host.memory.oom import OomWatch
from bench.host.ports import port_holder
from bench.host.process_groups import register, signal_group, stop_recorded_groups, unregister, wait_group_gone
from bench.run.server.exits import ExitInfo, ServerStartError, describe_exit
from bench.run.server.ready import foreign_listener, poll_until_ready
from bench.setup.adapter import ServeCommand
from bench.setup.profiles import ApiKey

STOP_GRACE_S = 15.0


class ServerProcess:
    """One server: `start()`, `wait_ready()`, `stop()`. Use `launch()` to get all three right."""

    def __init__(
        self,
        command: ServeCommand,
        *,
        host: str,
        port: int,
        ready_path: str,
        startup_timeout_s: float,
        log_path: Path,
        memory_limit_bytes: int | None = None,
        api_key: ApiKey | None = None,
    ):
        self.command = command
        self.api_key = api_key  # sent on the ready path
        self.host = host
        self.port = port
        self.ready_path = ready_path
        self.startup_timeout_s = startup_timeout_s
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None
        self.ready_after_s: float | None = None
        self.exit: ExitInfo | None = None
        self.memory_limit_bytes = memory_limit_bytes
        self.cgroup: memlimit.MemoryCgroup | None = None
        self.oom_watch: OomWatch | None = None
        self.oom_check_error: str | None = None  # set by _detect_oom when OOM detection failed
        self._started_at = 0.0
        self._born = 0.0  # the server's create time: groups it recorded must be younger
        # The suite's own time around the server (bench.run.server.process.overhead): spawning it, noticing
        # it became ready (an upper bound: the span between the last poll that found it not ready
        # and the one that did), and stopping it.
        self.spawn_s: float | None = None
        self.ready_detect_bound_s: float | None = None
        self.teardown_s: float | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def overhead(self) -> ServerOverhead:
        """The suite's seconds around this server: `spawn_s` (port check, cgroup, files, exec),
        `ready_detect_bound_s` (readiness noticed at most this long after it happened) and
        `teardown_s` (SIGTERM to the whole group gone, OOM check included); those measured."""
        spans: ServerOverhead = {}
        if self.spawn_s is not None:
            spans["spawn_s"] = round(self.spawn_s, 4)
        if self.ready_detect_bound_s is not None:
            spans["ready_detect_bound_s"] = round(self.ready_detect_bound_s, 4)
        if self.teardown_s is not None:
            spans["teardown_s"] = round(self.teardown_s, 4)
        return spans

    def start(self) -> None:
        entered = time.monotonic()
        holder = port_holder(self.host, self.port)
        if holder is not None:
            raise ServerStartError(f"port {self.port} is already held by {holder}", transient=True)
        env = {**os.environ, **self.command.env}
        argv = list(self.command.argv)
        if self.memory_limit_bytes is not None:
            try:
                self.cgroup = memlimit.create(self.memory_limit_bytes)
            except memlimit.MemoryLimitUnavailable as exc:
                raise ServerStartError(str(exc)) from exc
            try:
                argv = self.cgroup.wrap(argv, env.get("PATH"))
            except BaseException:
                self._remove_cgroup()
                raise
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        for path, text in self.command.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        try:
            with self.log_path.open("ab") as log:
                log.write(f"$ {self.command.shown()}\n".encode())
                if self.cgroup is not None:
                    limit = memlimit.format_size(self.cgroup.limit_bytes)
                    log.write(f"# memory limit {limit}: cgroup v{self.cgroup.version} {self.cgroup.path}\n".encode())
                if self.command.cpus is not None:
                    log.write(f"# CPU affinity {placement.format_cpus(self.command.cpus)}\n".encode())
                log.flush()
                with placement.inherited(self.command.cpus):  # set before exec: every child inherits it
                    self.proc = subprocess.Popen(
                        argv,
                        env=env,
                        cwd=self.command.cwd,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,  # its own process group, so we can stop its children too
                    )
        except placement.AffinityError as exc:
            self._remove_cgroup()
            raise ServerStartError(f"server not started: {exc}") from None
        except BaseException:
            self._remove_cgroup()
            raise
        self._started_at = time.monotonic()
        self.spawn_s = self._started_at - entered
        with contextlib.suppress(psutil.Error):  # psutil's clock: what recorded groups are compared with
            self._born = psutil.Process(self.proc.pid).create_time()
        self.oom_watch = OomWatch(self.proc.pid, self.cgroup)
        register(self.proc.pid)

    def note_tree(self, pids: dict[int, str] | None = None) -> None:
        """Remember the server's live processes, so a child killed later can be named (bench.host.memory.oom).

        Called while waiting for readiness and at stop; a ResourceSampler passes what it sees.
        """
        if self.oom_watch is None:
            return
        with contextlib.suppress(psutil.Error, OSError):
            if pids:
                self.oom_watch.add(pids)
            else:
                self.oom_watch.note()

    def _detect_oom(self, returncode: int | None, *, killed_by_us: bool, clean_stop: bool = False) -> dict | None:
        """OOM evidence for how the server ended, or None. When detection itself fails (or cannot
        decide, `OomUndecided`), the reason goes to `oom_check_error` ("<type>: <message>") and
        None is returned: an unanswered question is recorded beside the exit, never an OOM verdict,
        and never hides how the server ended."""
        if self.oom_watch is None:
            return None
        try:
            return self.oom_watch.detect(returncode, killed_by_us=killed_by_us, clean_stop=clean_stop)
        except Exception as exc:  # noqa: BLE001 - any failure here is recorded, not raised
            self.oom_check_error = f"{type(exc).__name__}: {exc}"
            return None

    def _remove_cgroup(self) -> dict | None:
        if self.cgroup is None:
            return None
        cg = self.cgroup
        info = cg.to_json()
        cg.kill_all()  # anything left inside was started by the server: setsid'd daemons included
        info["removed"] = cg.remove()
        return info

    def wait_ready(self, *, budget_s: float | None = None, stall_timeout_s: float | None = None) -> None:
        """Poll the ready path until HTTP 200. Gives up when the process exits, after the adapter's
        startup timeout, after `budget_s` more seconds (what is left of the cell's budget) or when for
        `stall_timeout_s` the log did not grow and the ready path gave no HTTP answer at all (the hang
        watchdog: a 503 while loading is a sign of life); the last two raise with `capped=True`."""
        assert self.proc is not None
        last_miss = poll_until_ready(
            self.proc, url=self.base_url + self.ready_path, ready_path=self.ready_path, api_key=self.api_key,
            log_path=self.log_path, started_at=self._started_at, startup_timeout_s=self.startup_timeout_s,
            budget_s=budget_s, stall_timeout_s=stall_timeout_s, note_tree=self.note_tree, died=self._died_starting)
        ready_at = time.monotonic()
        self.ready_after_s = round(ready_at - self._started_at, 3)
        self.ready_detect_bound_s = ready_at - last_miss
        stranger = foreign_listener(self.port, self.proc.pid)
        if stranger:
            raise ServerStartError(f"port {self.port} answers, but from {stranger}, not the server we started")
        if self.cgroup is not None and self.proc.pid not in self.cgroup.pids():
            raise ServerStartError(
                f"the server (pid {self.proc.pid}) is not inside its memory cgroup {self.cgroup.path}")

    def _died_starting(self, code: int, resets: int = 0) -> ServerStartError:
        """Transient (bound, so flags and model were fine): an exit code, no OOM sign, dropped polls."""
        if self.oom_watch is not None:
            self.oom_watch.note_group()  # children may outlive the leader
        oom = self._detect_oom(code, killed_by_us=False)
        if oom:
            detail = oom.get("line") or oom.get("note") or f"pid {oom.get('pid')}"
            what = f"was killed for memory while starting ({oom['source']}): {detail}"
        else:
            what = f"exited with {describe_exit(code)} while starting"
            if self.oom_check_error:
                what += f" (whether for memory is unknown: {self.oom_check_error})"
        if dropped := resets > 0 and code > 0 and not oom and not self.oom_check_error:
            what += f", after its port dropped {resets} readiness {'poll' if resets == 1 else 'polls'} unanswered"
        return ServerStartError(f"server {what}; log: {self.log_path}", self.log_path, oom=oom, transient=dropped)

    def exit_reason(self) -> str | None:
        """"server exited with code N" (or "with signal S") once the process has ended, else None."""
        if self.proc is None:
            return None
        code = self.exit.returncode if self.exit is not None else self.proc.poll()
        if code is None:
            return None
        return f"server exited with signal {signal_name(code)}" if code < 0 else f"server exited with code {code}"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace_s: float = STOP_GRACE_S) -> ExitInfo:
        """SIGTERM the group, wait up to `grace_s`, then SIGKILL. Idempotent."""
        if self.proc is None:
            return ExitInfo(None, None, False)
        if self.exit is not None:
            return self.exit
        entered = time.monotonic()
        pid = self.proc.pid
        died_on_its_own = self.proc.poll() is not None
        memory = None
        if self.oom_watch is not None:
            with contextlib.suppress(psutil.Error, OSError):  # the tree is going away as we look
                self.oom_watch.note()
                if died_on_its_own:
                    self.oom_watch.note_group()
        try:
            signal_group(pid, signal.SIGTERM)
            signal_group(pid, signal.SIGCONT)  # a stopped (SIGSTOP, T-state) server cannot act on TERM
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        finally:
            # Whatever happened above (a timeout alarm included), the group gets SIGKILL.
            signal_group(pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
            wait_group_gone(pid, timeout_s=5.0)
            stop_recorded_groups(self.command.group_manifest, self._born, grace_s)
            unregister(pid)
            code = self.proc.returncode
            # Our SIGKILL after the grace period is not an OOM; only the kernel or cgroup can say so.
            we_killed = not died_on_its_own and code == -signal.SIGKILL
            oom = self._detect_oom(code, killed_by_us=we_killed, clean_stop=not died_on_its_own and not we_killed)
            memory = self._remove_cgroup()
        self.exit = ExitInfo(
            returncode=code,
            signal=signal_name(code),
            stopped_by_us=not died_on_its_own,
            oom=oom,
            memory=memory,
            oom_check_error=self.oom_check_error,
        )
        self.teardown_s = time.monotonic() - entered
        return self.exit
