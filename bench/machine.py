"""Which machine a result came from: recorded in every result, and the results tree is scoped by it.

SiliconBench learnt this the hard way: an unscoped run on a second Mac deleted 40 result files of
the first one, and a stale result from another machine won a latest-by-mtime race. The slug comes
from the accelerator when there is one (an NVIDIA model such as `h200`, an Apple chip such as
`m5pro`), else from the CPU model; `CELLBENCH_MACHINE` overrides it.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import subprocess
from dataclasses import asdict, dataclass
from functools import cache

import psutil


@dataclass(frozen=True)
class Machine:
    slug: str
    host: str
    os: str
    cpu: str
    chip: str | None  # Apple chip brand string
    gpus: tuple[str, ...]
    cores: int
    memory_gib: float

    def to_json(self) -> dict:
        data = asdict(self)
        data["gpus"] = list(self.gpus)
        return data


def _run(cmd: list[str]) -> str:
    if not shutil.which(cmd[0]):
        return ""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
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


def _nvidia_gpus() -> tuple[str, ...]:
    names = _run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
    return tuple(n.strip() for n in names.splitlines() if n.strip())


def slugify(text: str) -> str:
    """`Apple M5 Pro` -> `m5pro`; `NVIDIA H200` -> `h200`; `Intel(R) Xeon(R) Processor` -> `intelxeonprocessor`."""
    text = re.sub(r"\((r|tm)\)", "", text.lower())
    text = re.sub(r"^(apple|nvidia)\s+", "", text)
    text = re.sub(r"\b(geforce|tesla)\s+", "", text)
    text = re.sub(r"\s+(nvl|sxm\d*|pcie)(\b.*)?$", "", text)  # H200 NVL / SXM5 / PCIe are one class
    return re.sub(r"[^a-z0-9]+", "", text) or "unknown"


def machine_slug(cpu: str, chip: str | None, gpus: tuple[str, ...]) -> str:
    if os.environ.get("CELLBENCH_MACHINE"):
        return os.environ["CELLBENCH_MACHINE"]
    if gpus:
        return slugify(gpus[0])
    return slugify(chip or cpu)


@cache
def detect() -> Machine:
    cpu = _cpu_model()
    chip = cpu if platform.system() == "Darwin" and cpu.startswith("Apple") else None
    gpus = _nvidia_gpus()
    return Machine(
        slug=machine_slug(cpu, chip, gpus),
        host=socket.gethostname(),
        os=f"{platform.system()} {platform.release()}",
        cpu=cpu,
        chip=chip,
        gpus=gpus,
        cores=os.cpu_count() or 0,
        memory_gib=round(psutil.virtual_memory().total / 2**30, 1),
    )
