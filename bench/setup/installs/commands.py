"""The commands a build runs, each with its output appended to the build log, and pip's one retry.

A pip command that reads the package index and fails on the network (the index unreachable, or a
connection it dropped: `pip_network_error` reads pip's own words in the log) is run once more 5 s
later; the first failure's line is kept in the install's details (`retried_after`) and in the log.
Every other failure (a missing version, a resolver conflict, a failed build) raises at once.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path
from typing import IO


def run_logged(cmd: list[str], log: IO[str], *, cwd: Path | None = None, env: dict | None = None) -> None:
    """Run one build command with its output appended to the build log; raise on failure."""
    log.write(f"\n$ {' '.join(cmd)}\n")
    log.flush()
    subprocess.run(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, check=True)


# pip's words for an index it could not reach, or that dropped the connection ("connection error:"
# is how its finder reports a page it could not fetch).
PIP_NETWORK = re.compile(r"connection error:|Connection aborted|Connection reset by peer|Connection refused|"
                         r"NewConnectionError|ConnectTimeoutError|ReadTimeoutError|IncompleteRead|Read timed out")
# pip's last words when the failure was the fetching itself: a page it never read lists no versions.
PIP_FETCH_FAILED = re.compile(r"^ERROR: (Could not find a version that satisfies .*\(from versions: none\)"
                              r"|No matching distribution found for |.*" + PIP_NETWORK.pattern + ")")
NETWORK_RETRY_S = 5.0


def pip_network_error(output: str) -> str | None:
    """The line of a failed pip run that shows the network failed it, or None. Conservative: some
    line names a connection failure, no package's build failed, and pip's last ERROR line is about
    fetching (no versions found, or the connection error itself), never a resolver conflict."""
    if "subprocess-exited-with-error" in output or "ResolutionImpossible" in output:
        return None
    errors = [line for line in output.splitlines() if line.startswith("ERROR: ")]
    network = [line.strip() for line in output.splitlines() if PIP_NETWORK.search(line)]
    if not network or not errors or not PIP_FETCH_FAILED.search(errors[-1]):
        return None
    return network[0][:300]


def run_pip(cmd: list[str], log: IO[str], details: dict) -> None:
    """A pip command that reads the package index, run once more when it failed on the network
    (`pip_network_error` of its own output in the build log); the first failure's line goes to
    `details["retried_after"]` and stays in the log. Any other failure raises at once."""
    log.flush()
    start = os.path.getsize(log.name)
    try:
        run_logged(cmd, log)
    except subprocess.CalledProcessError:
        log.flush()
        with open(log.name, "rb") as read:
            read.seek(start)
            why = pip_network_error(read.read().decode(errors="replace"))
        if why is None:
            raise
        details["retried_after"] = why
        log.write(f"\n# pip failed on the network ({why}): once more in {NETWORK_RETRY_S:g} s\n")
        _pause_before_retry()
        run_logged(cmd, log)


def _pause_before_retry() -> None:
    time.sleep(NETWORK_RETRY_S)
