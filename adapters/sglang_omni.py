"""sglang-omni's router with its workers: the server an sglang-omni eval config's profiles start.

An eval config written for sglang-omni's own runner names no cellbench framework in its server
profiles; such a profile launches this. The router reads a launcher file that says how many
workers to start, with how many GPUs each and which extra arguments, starts them in process
groups of their own and records those groups in `SGLANG_OMNI_ROUTER_CLEANUP_MANIFEST`; the groups
are stopped with the router. The command, for a profile with 2 workers on port 8013 (the router's
own: 8007 is SiliconBench's port for inferrs):

    SGLANG_OMNI_ROUTER_CLEANUP_MANIFEST=<dir>/router_pgids.txt \\
    <venv python> -m sglang_omni_router.python.serve --host 127.0.0.1 --port 8013 \\
        --launcher-config <dir>/launcher.yaml --policy least_request --health-success-threshold 1 \\
        --health-failure-threshold 2 --health-check-interval-secs 2 --log-level info

with `launcher: {backend: local, model_path, model_name, num_workers, num_gpus_per_worker,
worker_host, worker_base_port, worker_extra_args, wait_timeout}` in launcher.yaml. Readiness is
`/health`. Nothing is installed: the Python is the user's sglang-omni environment, `--venv-python`
(or `$EVAL_VENV_PYTHON`, or the config's `default_venv_python`) as the eval layer resolved it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import yaml

from bench.host.ports import free_port_run
from bench.setup.adapter import Adapter, Capabilities, NotConfigured, ServeCommand, ServeContext
from bench.setup.installs.cache import UNKNOWN_VERSION, Installation, InstallError
from bench.setup.installs.scripted import fill

NAME = "sglang_omni"
PYTHON_ENV = "EVAL_VENV_PYTHON"
MANIFEST_ENV = "SGLANG_OMNI_ROUTER_CLEANUP_MANIFEST"
# The launcher's defaults where a profile leaves a knob out (those of sglang-omni's own runner).
DEFAULTS = {"num_workers": 2, "num_gpus_per_worker": 1, "worker_host": "127.0.0.1", "worker_extra_args": "",
            "wait_timeout": 900, "router_policy": "least_request"}
HOW = f"pass --venv-python (or set ${PYTHON_ENV}) to the Python of an environment with sglang-omni installed"


@dataclass(frozen=True)
class UsersEnvironment:
    """sglang-omni lives in the user's own environment; cellbench never builds it."""

    framework: str = NAME
    version: str = "users-venv"

    def external(self) -> Installation | None:
        python = os.environ.get(PYTHON_ENV)
        if not python:
            return None
        return Installation(NAME, UNKNOWN_VERSION, Path(python).parent.parent, {"python": python},
                            source=f"${PYTHON_ENV}")

    def build(self, prefix: Path, log: IO[str]) -> Installation:
        raise InstallError(f"{NAME} is not installed by cellbench: {HOW}")

    def install_hint(self) -> str:
        return HOW


def launcher_file(ctx: ServeContext, worker_base_port: int) -> dict:
    opts = {**DEFAULTS, **ctx.options}
    values = {"model": str(ctx.model.path), "repo_root": str(opts.get("repo_root", ""))}
    return {"launcher": {
        "backend": "local",
        "model_path": fill(str(opts.get("model_path", "{model}")), values),
        "model_name": fill(str(opts.get("model_name", ctx.model.served_id)), values),
        "num_workers": int(opts["num_workers"]),
        "num_gpus_per_worker": int(opts["num_gpus_per_worker"]),
        "worker_host": str(opts["worker_host"]),
        "worker_base_port": worker_base_port,
        # A row's server_extra_by_hardware for this machine goes after the profile's own arguments.
        "worker_extra_args": fill(" ".join(a for a in (str(opts["worker_extra_args"]), opts.get("extra_args")) if a),
                                  values),
        "wait_timeout": int(opts["wait_timeout"]),
    }}


def _installed_python(install: Installation) -> str | None:
    try:
        return install.executable("python")
    except KeyError:
        return None


def serve(ctx: ServeContext) -> ServeCommand:
    if ctx.workdir is None:
        raise NotConfigured(f"{NAME}: the router needs a folder for its launcher file and process-group manifest")
    python = ctx.options.get("python") or _installed_python(ctx.install)
    if not python:
        raise NotConfigured(f"{NAME}: no Python environment: {HOW}")
    workers = int(ctx.options.get("num_workers", DEFAULTS["num_workers"]))
    launcher = launcher_file(ctx, free_port_run(workers, ctx.host, exclude=frozenset({ctx.port})))
    config, manifest = ctx.workdir / "launcher.yaml", ctx.workdir / "router_pgids.txt"
    argv = [
        str(python), "-m", "sglang_omni_router.python.serve",
        "--host", ctx.host, "--port", str(ctx.port),
        "--launcher-config", str(config),
        "--policy", str(ctx.options.get("router_policy", DEFAULTS["router_policy"])),
        "--health-success-threshold", "1", "--health-failure-threshold", "2",
        "--health-check-interval-secs", "2", "--log-level", "info",
    ]
    return ServeCommand(argv=argv, env={MANIFEST_ENV: str(manifest)},
                        files={config: yaml.safe_dump(launcher, sort_keys=False)}, group_manifest=manifest)


ADAPTER = Adapter(
    name=NAME,
    platforms=frozenset({"linux-x86_64+cuda", "linux-aarch64+cuda"}),
    model_format="hf",
    default_port=8013,
    ready_path="/health",
    recipes={"*": UsersEnvironment()},
    serve=serve,
    capabilities=Capabilities(ignore_eos=False),
    startup_timeout_s=660.0,
    benchmark_cells=False,
    places_extra_args=True,
)
