"""The model and the machine a `cellbench` command works on, chosen as a pytest session chooses
them, and said.

The model: `--model`, else `APPLEBENCH_MODEL` (SiliconBench's variable), else the default profile
(bench.setup.profiles.chosen_model). The machine's folder: `CELLBENCH_MACHINE`, else
`APPLEBENCH_RESULTS_SUBDIR` (set empty: SiliconBench's legacy tree, no machine folder), else the
hardware (bench.host.machine). `cellbench weekly`, `weekly
skip`, `noise`, `serve` and `eval` all choose here, so none of them measures or reads another
model or folder than the cells of the same shell would, and each says which and why in the
session header's words: `model qwen3-0.6b from APPLEBENCH_MODEL, machine m5pro from
APPLEBENCH_RESULTS_SUBDIR`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from bench.host.machine import HostMachine, detect
from bench.setup.profiles import ModelProfile, ProfileError, chosen_model, load_profile


@dataclass(frozen=True)
class Choice:
    profile: ModelProfile
    model: str  # the profile's name or path, as chosen
    model_source: str  # --model, APPLEBENCH_MODEL or default
    machine: HostMachine

    def machine_said(self) -> str:
        return self.machine.where()

    def said(self) -> str:
        return f"model {self.profile.name} from {self.model_source}, {self.machine_said()}"

    def session_args(self) -> list[str]:
        """What a pytest session started by the command is given so that it chooses the same
        model: `--model` only when `--model` chose it; a variable reaches the session itself, and
        its header then names that variable, as it would in the user's own shell."""
        return [f"--model={self.model}"] if self.model_source == "--model" else []


def choose(given: str | None, environ: Mapping[str, str] | None = None) -> Choice:
    """The choice; a ProfileError names the variable that chose a profile that cannot be loaded
    (the user may not remember setting it); a bad machine variable raises MachineSlugError."""
    environ = os.environ if environ is None else environ
    name, source = chosen_model(given, environ)
    said = "" if source == "--model" else f"{source}={name}: "
    try:
        profile = load_profile(name)
    except ProfileError as exc:
        raise ProfileError(f"{said}{exc}") from None
    except (OSError, UnicodeDecodeError) as exc:  # a profile file that exists but cannot be read
        raise ProfileError(f"{said or f'--model {name}: '}cannot read: {exc}") from None
    return Choice(profile, name, source, detect())
