"""machines.yaml: the self-hosted runners of the nightly job, and the job matrix made from it.

Each machine names its runner labels and platform and may override the defaults (model, splits,
requests, rounds, frameworks, cell budgets, eval rows, extra pytest arguments). `matrix` resolves
one night: the inputs of a manual run (`workflow_dispatch`) over the file's values, the frameworks
that run on each machine's platform, and a job timeout from the cell budgets, so that a job is
stopped only after every cell has had its budget. A machine's `rounds` (--rounds: every level
measured that many times) multiplies its cells' budgets, since each round is a whole run of the
cell's levels.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

import adapters
from bench.base.defaults import DEFAULT_MODEL, SPLITS
from bench.base.paths import PROJECT_ROOT
from bench.run.config import DEFAULT_CELL_BUDGET_S

MACHINES_FILE = PROJECT_ROOT / "machines.yaml"
PLATFORMS = ("darwin-arm64", "linux-x86_64", "linux-x86_64+cuda", "linux-aarch64", "linux-aarch64+cuda")
# GitHub stops a self-hosted runner's job after 5 days whatever timeout-minutes says.
MAX_JOB_MINUTES = 5 * 24 * 60
_DURATION_UNITS = {"s": 1 / 60, "m": 1.0, "h": 60.0}
_DEFAULTS: dict[str, Any] = {
    "model": DEFAULT_MODEL, "splits": list(SPLITS), "requests": None, "frameworks": None,
    "cell_budget": {split: f"{seconds / 60:g}m" for split, seconds in DEFAULT_CELL_BUDGET_S.items()},
    "setup_minutes": 60, "eval": False, "eval_minutes": 240,
    "pytest_args": [], "rounds": 1, "price_kwh": None, "price_hour": None,
}
_MACHINE_ONLY = {"name", "labels", "platform"}


class MachinesError(ValueError):
    """machines.yaml says something this module cannot use; the message names the file and the field."""


@dataclass(frozen=True)
class NightlyMachine:
    """One machine of machines.yaml: where the nightly job runs and what it runs there."""

    name: str  # also the results' machine slug (CELLBENCH_MACHINE) and the artifact's name
    labels: tuple[str, ...]
    platform: str
    model: str
    splits: tuple[str, ...]
    requests: int | None  # None: the suite's default
    frameworks: tuple[str, ...] | None  # None: every framework that runs on the platform
    cell_budget_minutes: dict[str, float]
    setup_minutes: float
    eval: bool
    eval_minutes: float
    pytest_args: tuple[str, ...] = field(default=())
    rounds: int = 1  # --rounds; each cell's budget is cell_budget_minutes x rounds
    price_kwh: float | None = None  # --price-kwh: electricity per kWh, for each level's cost
    price_hour: float | None = None  # --price-hour: the machine per hour (its cloud price, or cost spread over hours)

    def cell_minutes(self, split: str) -> float:
        """A cell's budget: the split's, once per round."""
        return self.cell_budget_minutes[split] * self.rounds

    def runnable_frameworks(self) -> list[str]:
        """The frameworks whose adapters run on this machine's platform (and that it lists, if it does)."""
        offered = {self.platform, self.platform.split("+")[0]}  # a CUDA host also runs the CPU builds
        names = [a.name for a in adapters.registry().values()
                 if a.bind is None and a.benchmark_cells and a.platforms & offered]
        return sorted(n for n in names if self.frameworks is None or n in self.frameworks)


def _minutes(value: Any, where: str) -> float:
    text = str(value).strip().lower()
    unit = _DURATION_UNITS.get(text[-1:])
    try:
        minutes = float(text[:-1] if unit else text) * (unit or 1.0)
    except ValueError:
        raise MachinesError(f"{where}: a duration such as 45m, 2h or 90 (minutes), got {value!r}") from None
    if minutes <= 0:
        raise MachinesError(f"{where}: a duration more than 0, got {value!r}")
    return minutes


def _machine(entry: dict[str, Any], defaults: dict[str, Any], where: str) -> NightlyMachine:
    unknown = set(entry) - set(_DEFAULTS) - _MACHINE_ONLY
    if unknown:
        raise MachinesError(f"{where}: unknown field {', '.join(sorted(unknown))}")
    missing = _MACHINE_ONLY - set(entry)
    if missing:
        raise MachinesError(f"{where}: missing {', '.join(sorted(missing))}")
    v = {**defaults, **entry}
    name, labels = str(v["name"]), [str(label) for label in v["labels"] or ()]
    if not name.replace("-", "").replace("_", "").isalnum() or not labels:
        raise MachinesError(f"{where}: a name of letters, digits, - and _, and a list of runner labels")
    if v["platform"] not in PLATFORMS:
        raise MachinesError(f"{where}: platform is one of {', '.join(PLATFORMS)}, got {v['platform']!r}")
    splits = tuple(v["splits"])
    if not splits or set(splits) - set(SPLITS):
        raise MachinesError(f"{where}: splits are {', '.join(SPLITS)}, got {splits}")
    frameworks = tuple(v["frameworks"]) if v["frameworks"] is not None else None
    unknown_fw = set(frameworks or ()) - set(adapters.registry())
    if unknown_fw:
        raise MachinesError(f"{where}: no adapter named {', '.join(sorted(unknown_fw))}")
    budgets = {split: _minutes(value, f"{where}.cell_budget.{split}") for split, value in v["cell_budget"].items()}
    if set(splits) - set(budgets):
        raise MachinesError(f"{where}: cell_budget has no duration for {', '.join(set(splits) - set(budgets))}")
    if v["requests"] is not None and (not isinstance(v["requests"], int) or v["requests"] < 1):
        raise MachinesError(f"{where}: requests is a count of 1 or more, got {v['requests']!r}")
    if not isinstance(v["rounds"], int) or isinstance(v["rounds"], bool) or v["rounds"] < 1:
        raise MachinesError(f"{where}: rounds is a count of 1 or more, got {v['rounds']!r}")
    for price in ("price_kwh", "price_hour"):
        value = v[price]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
            raise MachinesError(f"{where}: {price} is a price of 0 or more (null: none), got {value!r}")
    return NightlyMachine(name=name, labels=tuple(labels), platform=v["platform"], model=str(v["model"]), splits=splits,
                   requests=v["requests"], frameworks=frameworks, cell_budget_minutes=budgets,
                   setup_minutes=_minutes(v["setup_minutes"], f"{where}.setup_minutes"), eval=bool(v["eval"]),
                   eval_minutes=_minutes(v["eval_minutes"], f"{where}.eval_minutes"),
                   pytest_args=tuple(str(a) for a in v["pytest_args"]), rounds=v["rounds"],
                   price_kwh=v["price_kwh"], price_hour=v["price_hour"])


def load_machines(path: Path = MACHINES_FILE) -> list[NightlyMachine]:
    """Every machine of `path`, defaults applied; MachinesError names the field that is wrong."""
    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise MachinesError(f"{path}: {exc}") from None
    unknown = set(data) - {"defaults", "machines"}
    if unknown:
        raise MachinesError(f"{path}: unknown top-level field {', '.join(sorted(unknown))}")
    extra = set(data.get("defaults") or {}) - set(_DEFAULTS)
    if extra:
        raise MachinesError(f"{path}: defaults: unknown field {', '.join(sorted(extra))}")
    defaults = {**_DEFAULTS, **(data.get("defaults") or {})}
    machines = [_machine(entry, defaults, f"{path}: machines[{i}] ({entry.get('name', '?')})")
                for i, entry in enumerate(data.get("machines") or [])]
    names = [m.name for m in machines]
    if len(set(names)) != len(names) or not machines:
        raise MachinesError(f"{path}: machines need distinct names, and at least one machine")
    return machines


@dataclass(frozen=True)
class Inputs:
    """A manual run's inputs; empty ones keep machines.yaml's values (a scheduled night has none)."""

    model: str = ""
    splits: str = ""
    frameworks: str = ""
    requests: str = ""
    eval: bool | None = None  # None: each machine's own `eval`
    machines: str = ""


def _items(text: str) -> list[str]:
    """`a, b,` -> ["a", "b"]: an input's comma-separated names."""
    return [part.strip() for part in text.split(",") if part.strip()]


def job_minutes(machine: NightlyMachine, splits: tuple[str, ...], cells: int, with_eval: bool) -> int:
    """The job's timeout: set-up, then every cell of every split at its full budget, then the eval rows.

    timeout = setup_minutes + sum over splits of (cells x cell_budget[split] x rounds) + (eval_minutes if
    eval), capped at GitHub's 5 days for a self-hosted job."""
    minutes = machine.setup_minutes + sum(cells * machine.cell_minutes(s) for s in splits)
    return int(min(MAX_JOB_MINUTES, round(minutes + (machine.eval_minutes if with_eval else 0))))


def matrix_entry(machine: NightlyMachine, inputs: Inputs) -> dict[str, Any] | None:
    """One machine's job for this night, or None when none of the chosen frameworks runs there."""
    chosen = _items(inputs.frameworks)
    frameworks = [f for f in machine.runnable_frameworks() if not chosen or f in chosen]
    if not frameworks:
        return None
    splits = tuple(_items(inputs.splits)) or machine.splits
    if set(splits) - set(SPLITS):
        raise MachinesError(f"splits are {', '.join(SPLITS)}, got {inputs.splits!r}")
    requests = int(inputs.requests) if inputs.requests.strip() else machine.requests
    with_eval = machine.eval if inputs.eval is None else (inputs.eval and machine.eval)
    budget = ",".join(f"{s}={machine.cell_minutes(s):g}m" for s in splits)
    pytest_args = ["--cell-budget", budget, *(["--requests", str(requests)] if requests else []),
                   *(["--rounds", str(machine.rounds)] if machine.rounds > 1 else []),
                   *(["--price-kwh", f"{machine.price_kwh:g}"] if machine.price_kwh is not None else []),
                   *(["--price-hour", f"{machine.price_hour:g}"] if machine.price_hour is not None else []),
                   *machine.pytest_args]
    return {
        "name": machine.name,
        "labels": list(machine.labels),
        "platform": machine.platform,
        "model": inputs.model.strip() or machine.model,
        "splits": ",".join(splits),
        "frameworks": ",".join(frameworks),
        "pytest_args": shlex.join(pytest_args),
        "eval": with_eval,
        "timeout_minutes": job_minutes(machine, splits, len(frameworks), with_eval),
    }


def matrix(machines: list[NightlyMachine], inputs: Inputs) -> list[dict[str, Any]]:
    """The night's job matrix: the machines the inputs name (all by default) that have work."""
    wanted = _items(inputs.machines)
    unknown = set(wanted) - {m.name for m in machines}
    if unknown:
        raise MachinesError(f"no machine named {', '.join(sorted(unknown))} in machines.yaml")
    entries = [matrix_entry(m, inputs) for m in machines if not wanted or m.name in wanted]
    return [e for e in entries if e is not None]
