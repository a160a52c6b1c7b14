"""Which machine a result came from: recorded in every result, and the results tree is scoped by it.

Scoping keeps machines apart: a clean or a rerun on one machine never deletes another's result
files, and a stale result from another machine never wins a latest-by-mtime race. The slug comes
from the accelerator when there is one (an NVIDIA model such as `h200`, an Apple chip such as
`m5pro`), else from the CPU model. Two variables override it, the first one set wins:
`CELLBENCH_MACHINE`, then `APPLEBENCH_RESULTS_SUBDIR`, SiliconBench's name for the same folder
(`results/<model>/m5pro/...`), so a machine its team scoped keeps its folder. No command-line
option sets it: every command (cells, clean, report, weekly) must agree on it, and only the
environment reaches them all. `slug_source` records which one chose.

SiliconBench's legacy machine (its M2 Max) files at the model's root, `results/<model>/<split>/`,
with no machine folder. cellbench files there only when asked by name: `APPLEBENCH_RESULTS_SUBDIR`
set and empty (SiliconBench's own spelling of that root) and no `CELLBENCH_MACHINE`. The slug is
then still this machine's, recorded in every result as always; only its `folder` is empty, and a
results folder without a machine folder is read as the legacy tree of the machine its own newest
result names (bench.core.result.store.split_place).

`nvidia-smi` decides whether there is an NVIDIA GPU. Not installed, or "No devices were found":
no GPU. Any other failure (an error exit, a hang past `NVIDIA_SMI_TIMEOUT_S`) means the question
is unanswered, which is not the same as "no GPU": the machine block records `gpu_probe_error`,
and the slug becomes the CPU's with `-unknown-gpu` appended (e.g. `intelxeonprocessor-unknown-gpu`).
Why not the CPU's slug: a GPU host whose driver misbehaves for one session would file GPU-less
numbers among its CPU-only results and its comparisons, and `cellbench clean` would treat them as
that machine's. Why not refuse: every caller (cells, reports, clean, weekly) would have to turn
the refusal into a clear line, and a host that really has no GPU but a broken `nvidia-smi` could
not run at all. The marked slug keeps such results apart, and the suffix and the recorded error
say what to fix (or set `CELLBENCH_MACHINE`). The answer is kept for the life of the process,
failure included, so every cell of a session files under one slug and a hanging `nvidia-smi`
costs its timeout once; the next session asks again.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Annotated, TypedDict

import psutil

from bench.base.doc import Doc


class _MachineBlockRequired(TypedDict):
    slug: Annotated[str, Doc("Its identifier in paths: CPU or chip and GPUs.", pattern='^[a-z0-9_-]+$')]


class MachineBlock(_MachineBlockRequired, total=False):
    """The machine the cell ran on (bench.host.machine)."""

    # measured results only, but gpu_probe_error
    host: Annotated[str, Doc("Host name.")]
    os: Annotated[str, Doc("Operating system and kernel.")]
    cpu: Annotated[str, Doc("CPU model.")]
    chip: Annotated[str | None, Doc("Apple chip name; null elsewhere.")]
    gpus: Annotated[list[str], Doc("GPU names nvidia-smi listed.")]
    cores: Annotated[int, Doc("Logical CPUs.")]
    memory_gib: Annotated[float, Doc("Physical memory, GiB.")]
    gpu_probe_error: Annotated[str | None, Doc("Why nvidia-smi gave no answer (an error exit, a timeout); the slug "
                                               "then ends in -unknown-gpu. Null or absent when it answered or is not "
                                               "installed.")]
    slug_source: Annotated[str, Doc("What chose the slug: detected from the hardware, or the variable that set it "
                                    "(CELLBENCH_MACHINE, then APPLEBENCH_RESULTS_SUBDIR). Absent in results from "
                                    "before it was recorded, and in imported ones.",
                                    enum=['detected', 'CELLBENCH_MACHINE', 'APPLEBENCH_RESULTS_SUBDIR'])]


@dataclass(frozen=True)
class HostMachine:
    """The machine this process runs on, as `detect()` finds it; its `slug` files the results."""

    slug: str
    host: str
    os: str
    cpu: str
    chip: str | None  # Apple chip brand string
    gpus: tuple[str, ...]
    cores: int
    memory_gib: float
    gpu_probe_error: str | None = None  # why `nvidia-smi` gave no answer; None when it answered or is absent
    slug_source: str = "detected"  # or the variable that set it (SLUG_VARIABLES)
    legacy_tree: bool = False  # asked for SiliconBench's legacy root (`legacy_asked`): no machine folder

    @property
    def folder(self) -> str:
        """The folder under results/<model>/ this machine files in: its slug, or "" (the model's own
        folder) for SiliconBench's legacy tree. `results_root / model / folder` is its results."""
        return "" if self.legacy_tree else self.slug

    def where(self) -> str:
        """How its folder was chosen, in words: "machine m5pro from APPLEBENCH_RESULTS_SUBDIR", or
        for the legacy tree "machine m2max from detected, in SiliconBench's legacy tree ..."."""
        said = f"machine {self.slug} from {self.slug_source}"
        if self.legacy_tree:
            said += (", in SiliconBench's legacy tree results/<model>/<split>/ (APPLEBENCH_RESULTS_SUBDIR is set "
                     "empty)")
        return said

    def to_json(self) -> MachineBlock:
        """Every field but `legacy_tree`: where it files, not what it is (the result's path says it)."""
        return {"slug": self.slug, "host": self.host, "os": self.os, "cpu": self.cpu, "chip": self.chip,
                "gpus": list(self.gpus), "cores": self.cores, "memory_gib": self.memory_gib,
                "gpu_probe_error": self.gpu_probe_error, "slug_source": self.slug_source}


def _run(cmd: list[str]) -> str:
    if not shutil.which(cmd[0]):
        return ""
    try:
        out = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _cpu_model() -> str:
    if platform.system() == "Darwin":
        return _run(["sysctl", "-n", "machdep.cpu.brand_string"]) or platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


NVIDIA_SMI_TIMEOUT_S = 10.0
_NO_DEVICES = "No devices were found"


def probe_nvidia_gpus() -> tuple[tuple[str, ...], str | None]:
    """The NVIDIA GPUs' names, and why `nvidia-smi` could not say (None when it could).

    No `nvidia-smi` on PATH, or one that finds no devices, is a definite "no GPU"."""
    argv = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]
    if not shutil.which(argv[0]):
        return (), None
    try:
        done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, errors="replace")
    except subprocess.TimeoutExpired:
        return (), f"nvidia-smi did not answer within {NVIDIA_SMI_TIMEOUT_S:g} s"
    except OSError as exc:
        return (), f"nvidia-smi could not run: {exc}"
    said = " ".join((done.stdout + " " + done.stderr).split())
    if _NO_DEVICES in said:
        return (), None
    if done.returncode != 0:
        return (), f"nvidia-smi exited with code {done.returncode}: {said[:200] or 'no output'}"
    return tuple(n.strip() for n in done.stdout.splitlines() if n.strip()), None


def slugify(text: str) -> str:
    """`Apple M5 Pro` -> `m5pro`; `NVIDIA H200` -> `h200`; `Intel(R) Xeon(R) Processor` -> `intelxeonprocessor`."""
    text = re.sub(r"\((r|tm)\)", "", text.lower())
    text = re.sub(r"^(apple|nvidia)\s+", "", text)
    text = re.sub(r"\b(geforce|tesla)\s+", "", text)
    text = re.sub(r"\s+(nvl|sxm\d*|pcie)(\b.*)?$", "", text)  # H200 NVL / SXM5 / PCIe are one class
    return re.sub(r"[^a-z0-9]+", "", text) or "unknown"


SLUG = re.compile(r"^[a-z0-9_-]+$")  # as the result schema's machine.slug
SLUG_VARIABLES = ("CELLBENCH_MACHINE", "APPLEBENCH_RESULTS_SUBDIR")  # the first one set wins


class MachineSlugError(ValueError):
    """A variable names a machine folder that is not a slug; `str()` names the variable."""


def legacy_asked(env: Mapping[str, str] = os.environ) -> bool:
    """Whether SiliconBench's legacy root is asked for by name: `APPLEBENCH_RESULTS_SUBDIR` set and
    empty, and no `CELLBENCH_MACHINE` (which names a folder of its own)."""
    return env.get("APPLEBENCH_RESULTS_SUBDIR") == "" and not env.get("CELLBENCH_MACHINE")


def slug_choice(env: Mapping[str, str] = os.environ) -> tuple[str, str] | None:
    """(slug, the variable that set it), or None when neither is set (empty counts as unset here:
    an empty APPLEBENCH_RESULTS_SUBDIR asks for the legacy root, `legacy_asked`, not for a slug).

    A value that is not a slug is refused, not slugged: the user named a folder, and filing the
    results under another name would hide them from the scripts that look there."""
    for name in SLUG_VARIABLES:
        value = env.get(name, "")
        if value:
            if not SLUG.match(value):
                raise MachineSlugError(f"{name}={value!r} is not a machine slug (lowercase letters, digits, - and _, "
                                       "as results/<model>/<machine>/ names it)")
            return value, name
    return None


LEGACY_CHIP = "Apple M2 Max"  # the machine SiliconBench's legacy root results/<model>/<split>/ belongs to


def siliconbench_subdir(env: Mapping[str, str] = os.environ, *, system: str | None = None,
                        chip: str | None = None) -> tuple[str, str] | None:
    """Where SiliconBench's own scripts file this machine's runs and journals, as its config.sh
    chooses: (the folder under results/<model>/, what chose it); "" is its legacy root, the M2
    Max's. An APPLEBENCH_RESULTS_SUBDIR that is set wins, empty included (SiliconBench's rule);
    else on macOS the chip's name (`Apple M5 Pro` -> `m5pro`, no chip -> `unknown-apple`, the M2
    Max -> the root). None elsewhere: SiliconBench's weekly track runs on macOS only. Read-only:
    cellbench's own folder is still `slug` (the readers of prior journals look in both)."""
    if "APPLEBENCH_RESULTS_SUBDIR" in env:
        return env["APPLEBENCH_RESULTS_SUBDIR"], "APPLEBENCH_RESULTS_SUBDIR"
    if (system or platform.system()) != "Darwin":
        return None
    chip = _cpu_model() if chip is None else chip
    if chip == LEGACY_CHIP:
        return "", f"SiliconBench's legacy root, {LEGACY_CHIP}'s"
    if not chip.strip():
        return "unknown-apple", "no chip name"
    return re.sub(r"[^a-z0-9]", "", chip.lower().removeprefix("apple ")), f"the chip, {chip}"


def machine_slug(cpu: str, chip: str | None, gpus: tuple[str, ...], gpu_probe_error: str | None = None) -> str:
    chosen = slug_choice()
    if chosen is not None:
        return chosen[0]
    if gpus:
        return slugify(gpus[0])
    if gpu_probe_error:
        return f"{slugify(chip or cpu)}-unknown-gpu"
    return slugify(chip or cpu)


@cache
def detect() -> HostMachine:
    """This machine; raises MachineSlugError for a slug variable that is not a slug."""
    chosen = slug_choice()
    cpu = _cpu_model()
    chip = cpu if platform.system() == "Darwin" and cpu.startswith("Apple") else None
    gpus, gpu_probe_error = probe_nvidia_gpus()
    return HostMachine(
        slug=machine_slug(cpu, chip, gpus, gpu_probe_error),
        host=socket.gethostname(),
        os=f"{platform.system()} {platform.release()}",
        cpu=cpu,
        chip=chip,
        gpus=gpus,
        cores=os.cpu_count() or 0,
        memory_gib=round(psutil.virtual_memory().total / 2**30, 1),
        gpu_probe_error=gpu_probe_error,
        slug_source=chosen[1] if chosen else "detected",
        legacy_tree=legacy_asked(),
    )
