"""`cellbench serve FRAMEWORK`: one framework's server in the foreground, exactly as a cell starts it.

The manual debugging step of the weekly run: the same command, port, environment and kind of log
as the framework's cell for that split, the URL and the verify run to try against it, and Ctrl-C
(or SIGTERM) stops the server and its whole process group, as a cell's teardown does.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path

import adapters
from bench.base.defaults import DEFAULT_LEVELS, SPLITS
from bench.base.paths import PROJECT_ROOT
from bench.cli.choice import choose
from bench.host.ports import free_port
from bench.plugins.opts.settings import cell_option
from bench.run.cell import bind
from bench.run.server.exits import ServerStartError
from bench.run.server.launch import launching
from bench.setup import profiles
from bench.setup.adapter import NotConfigured, ServeContext, this_platform
from bench.setup.installs.cache import InstallError, NotInstalled

HOST = "127.0.0.1"
DEFAULT_CONCURRENCY = max(DEFAULT_LEVELS)  # a cell's largest default level: the slots it sizes the server for


def _stop_on_sigterm() -> None:
    def raise_interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, raise_interrupt)


def serve(args: argparse.Namespace) -> int:
    adapter = adapters.get(args.framework)
    tag = adapter.platform_here()
    if tag is None:
        print(f"{adapter.name} runs on {', '.join(sorted(adapter.platforms))}; this is {this_platform()}",
              file=sys.stderr)
        return 2
    try:
        choice = choose(args.model)
        profile = choice.profile
        key = profiles.api_key(args.api_key, os.environ, profile)  # as a cell takes it
        adapter, install, model = bind(adapter, tag, profile, None, args.install, pinned=args.pinned)
        port = args.port if args.port is not None else adapter.default_port
        port = free_port(HOST) if port == 0 else port
        ctx = ServeContext(install, model, HOST, port, args.split, args.concurrency, tag,
                           api_key=key.value if key else None)
        command = replace(adapter.command(ctx), secrets=(key.value,) if key else ())
    except (profiles.ProfileError, profiles.ProfileUnavailable, NotInstalled, InstallError, NotConfigured,
            ValueError) as exc:
        print(f"cellbench serve: {exc}", file=sys.stderr)
        return 2
    log = args.log or PROJECT_ROOT / "results" / "serve" / f"{adapter.name}-{args.split}.log"
    url = f"http://{HOST}:{port}"
    print(f"$ {command.shown()}", flush=True)
    _stop_on_sigterm()
    try:
        with launching() as launch:
            server = launch(command, adapter, HOST, port, log, api_key=key)
            print(f"{adapter.name} {install.version} ({args.split}) is ready at {url} after "
                  f"{server.ready_after_s:.1f} s, serving {model.served_id!r}; log: {log}")
            print(f"chosen:  {choice.said()}")
            print(f"verify:  curl -s {url}/v1/models")
            print(f"         pytest -m {args.split} -k openai --endpoint {url} --model {choice.model} --requests 3 "
                  "--concurrency 1")
            print("Ctrl-C stops it.", flush=True)
            while server.alive():
                time.sleep(0.5)
            print(f"cellbench serve: {server.exit_reason()}; log: {log}", file=sys.stderr)
            return 1
    except ServerStartError as exc:
        print(f"cellbench serve: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"stopped {adapter.name} on {url}", flush=True)
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cellbench serve", description=__doc__.splitlines()[0])
    parser.add_argument("framework", choices=sorted(adapters.registry()))
    parser.add_argument("--split", choices=SPLITS, default=SPLITS[0], help=f"whose serve flags [{SPLITS[0]}]")
    cell_option("--model").add_argument(parser)  # the options a cell takes too: its help and checks
    cell_option("--port").add_argument(parser)
    parser.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY,
                        help=f"slots the server is sized for, as a cell's largest level [{DEFAULT_CONCURRENCY}]")
    parser.add_argument("--install", action="store_true", help="install the framework first if it is not")
    cell_option("--pinned").add_argument(parser)
    parser.add_argument("--log", type=Path, default=None, help="server log [results/serve/<framework>-<split>.log]")
    cell_option("--api-key").add_argument(parser)
    return serve(parser.parse_args(argv))
