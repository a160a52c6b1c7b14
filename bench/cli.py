"""`cellbench` command: installs and housekeeping that are not benchmark cells."""

from __future__ import annotations

import argparse
import json
import sys

import adapters
from bench.installs import InstallError, ensure_installed


def _install(args: argparse.Namespace) -> int:
    names = args.frameworks or [a.name for a in adapters.registry().values() if a.runs_here()]
    rc = 0
    for name in names:
        adapter = adapters.get(name)
        try:
            inst = ensure_installed(adapter.recipe)
        except InstallError as exc:
            print(f"{name}: FAILED: {exc}", file=sys.stderr)
            rc = 1
            continue
        print(json.dumps(inst.to_json()))
    return rc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cellbench")
    sub = parser.add_subparsers(dest="command", required=True)
    install = sub.add_parser("install", help="install frameworks into the cellbench cache")
    install.add_argument("frameworks", nargs="*", help="default: every framework that runs on this platform")
    install.set_defaults(func=_install)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
