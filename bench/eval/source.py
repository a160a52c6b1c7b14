"""What a refreshed table row says about where its numbers came from.

Source cells read `<prefix> [<hardware>, <workload>]`. The prefix names the code that produced
the numbers (`PR #N`, `main <sha7>`, `local <sha7>`, `dirty <sha7>`), so a reviewer can tell a
number measured on merged code from one measured on a workstation with uncommitted edits. The
hardware tag is the accelerator when there is one (H200, M5 Pro), else the CPU model; it is what
distinguishes one machine's row from another's, so it is overridable for a renamed machine. When
`nvidia-smi` failed (`HostMachine.gpu_probe_error`), the tag is the CPU's plus `+ unknown GPU`, so such
a run never replaces the CPU-only machine's row.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from bench.base.git import git
from bench.host.machine import HostMachine

# NVIDIA names carry form factors, memory sizes and generations ("NVIDIA H100 80GB HBM3", "NVIDIA
# GH200 480GB", "NVIDIA B300 SXM6 AC", "NVIDIA RTX PRO 6000 Blackwell Server Edition"): the model
# is the tag, spaces dropped (H100, GH200, B300, RTXPRO6000, RTX4090). Grace pairs (GH, GB) come
# before the bare letters. A word after the model that names another product (`VARIANT_WORDS`, or
# a version such as v2) stays in the tag, wherever it stands: an RTX 4090 D is not an RTX 4090,
# and its slower results must never replace the 4090's rows (RTX4090D, RTX3090TI, RTX6000ADA,
# RTX4090LAPTOP, RTXPRO6000MAXQ).
_NVIDIA_MODEL = re.compile(
    r"\b(RTX(?:\s?PRO)?\s?[A-Z]?\d{4}[A-Z]?"  # RTX 4090, RTX A6000, RTX PRO 6000, RTX 2000E
    r"|GTX\s?\d{3,4}"
    r"|(?:GH|GB|[ABHKLPTV])\d{1,3}[A-Z]?)\b",  # GH200, GB200, B200, H20, A10G, L40S, T4, V100
    re.IGNORECASE)
VARIANT_WORDS = ("Ti", "SUPER", "D", "Ada", "SFF", "Max-Q", "Laptop", "Mobile")
_VARIANT = re.compile(rf"^(?:{'|'.join(map(re.escape, VARIANT_WORDS))}|v\d+)$", re.IGNORECASE)
_CPU_NOISE = re.compile(r"\((r|tm)\)|\bcpu\b|\bprocessor\b|@.*$|\b\d+-core\b", re.IGNORECASE)


def hardware_tag(machine: HostMachine, override: str | None = None) -> str:
    """`H200`, `M5 Pro`, `Intel Xeon`: the accelerator's model, else the CPU's."""
    if override:
        return override
    if machine.gpus:
        name = machine.gpus[0]
        found = _NVIDIA_MODEL.search(name)
        if found is None:
            return name.removeprefix("NVIDIA ").strip()
        variants = [word for word in name[found.end():].split() if _VARIANT.match(word)]
        return "".join([found.group(1), *variants]).upper().replace(" ", "").replace("-", "")
    if machine.chip:
        return machine.chip.removeprefix("Apple ").strip()
    cpu = " ".join(_CPU_NOISE.sub(" ", machine.cpu).split()) or "unknown"
    return f"{cpu} + unknown GPU" if machine.gpu_probe_error else cpu


def _pr_number(root: Path) -> str | None:
    """The pull request under test: CI's ref (`refs/pull/N/merge`), else `gh pr view` when gh is here."""
    ref = os.environ.get("GITHUB_REF", "")
    found = re.fullmatch(r"refs/pull/(\d+)/(merge|head)", ref)
    if found:
        return found.group(1)
    if shutil.which("gh"):
        try:
            out = subprocess.run(["gh", "pr", "view", "--json", "number", "-q", ".number"], cwd=root,
                                 capture_output=True, text=True, timeout=5, stdin=subprocess.DEVNULL, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if out.returncode == 0 and out.stdout.strip().isdigit():
            return out.stdout.strip()
    return None


def source_prefix(root: Path) -> str:
    """`dirty <sha7>` when the checkout differs from HEAD (the numbers may come from files no one
    can check out): a tracked file edited, or an untracked file that `.gitignore` does not cover
    (a new module, a prompt file); else `PR #N`, else `main <sha7>` on main, else `local <sha7>`.
    Ignored files (results, caches, `.venv`) leave it clean. A `git status` that fails says `dirty`."""
    head = git(root, "rev-parse", "--short=7", "HEAD", timeout=10)
    if head.returncode != 0:
        return "local (no git)"
    sha = head.stdout.strip()
    status = git(root, "status", "--porcelain", "--untracked-files=all", timeout=10)
    if status.returncode != 0 or status.stdout.strip():
        return f"dirty {sha}"
    pr = _pr_number(root)
    if pr:
        return f"PR #{pr}"
    branch = git(root, "rev-parse", "--abbrev-ref", "HEAD", timeout=10)
    return f"main {sha}" if branch.stdout.strip() == "main" else f"local {sha}"
