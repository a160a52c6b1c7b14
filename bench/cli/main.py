"""`cellbench` command: installs and housekeeping that are not benchmark cells.

`cellbench install [fw...]` installs frameworks into the cache; `cellbench doctor [--json]` says,
for every framework, where it runs, whether it can run here, what is installed (version and
where from) and the command that installs it. `cellbench report` rebuilds the reports from
result files, or with `--as TOOL` prints them under another tool's metric names (bench.reports.rebuild);
`cellbench weekly` runs the unattended weekly pipeline (bench.cli.weekly);
`cellbench eval precheck|locate` checks an eval config's rows without running them (bench.cli.eval);
`cellbench serve FRAMEWORK` starts one server as its cell would, for debugging by hand (bench.cli.serve);
`cellbench update` installs frameworks' newer releases beside the pinned ones (bench.cli.update);
`cellbench compare OLD NEW` judges two runs figure by figure and `cellbench noise FRAMEWORK` measures
a machine's noise floor (bench.cli.decisions); `cellbench perf compare` runs cellbench's client
beside the peers' (vLLM's, AIPerf, guidellm) on one null server (bench.perf.compare). Install and
doctor use the recorded update of a framework unless given `--pinned` (bench.setup.installs.updates).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

import adapters
from bench.host.machine import MachineSlugError
from bench.perf.peers import Peer, tool
from bench.setup.adapter import Adapter, host_platforms, this_platform
from bench.setup.installs.cache import InstallError, NotInstalled, Recipe, build_log_path, cached, ensure_installed
from bench.setup.installs.scripted import ScriptedInstall
from bench.setup.installs.updates import install_selected, select


def _install(args: argparse.Namespace) -> int:
    """Install one framework after the other. Side by side they took as long on 2 cores
    (docs/measurements.md): llama.cpp's build and pip's unpacking are both bound by CPU."""
    names = args.frameworks or [a.name for a in adapters.registry().values() if a.runs_here()]
    rc = 0
    for name in names:
        if (peer := tool(name)) is not None:  # a peer's client and recipe (`cellbench perf compare`), not a framework
            rc = _install_tool(*peer) or rc
            continue
        adapter = adapters.get(name)
        tag = adapter.platform_here()
        if tag is None:
            print(f"{name}: runs on {', '.join(sorted(adapter.platforms))}; this is {this_platform()}", file=sys.stderr)
            rc = 1
            continue
        recipe = adapter.recipe_for(tag)
        chosen = select(recipe, pinned=args.pinned).recipe
        builds = getattr(chosen, "has_installer", True)  # False: only a user's own binary (OwnBinary)
        try:
            if builds and chosen.external() is None and cached(chosen) is None:  # minutes of silence otherwise
                print(f"{name}: installing {chosen.version} (log: {build_log_path(chosen)})", file=sys.stderr,
                      flush=True)
        except InstallError:
            pass  # a user's own install that is unusable: install_selected says why, below
        try:
            inst = install_selected(recipe, pinned=args.pinned, allow_install=True)
        except NotInstalled as exc:  # nothing cellbench can install here: the user's own binary only
            print(f"{name}: {exc}", file=sys.stderr)
            # Asked for by name it is a failure; in "everything that runs here" (`make bench`) its
            # cells simply skip, saying the same.
            rc = 1 if args.frameworks else rc
            continue
        except InstallError as exc:
            print(f"{name}: FAILED: {exc}", file=sys.stderr)
            rc = 1
            continue
        if first := inst.details.get("retried_after"):
            print(f"{name}: pip failed on the network and ran once more: {first}", file=sys.stderr)
        print(json.dumps(inst.to_json()), flush=True)
    return rc


def _install_tool(peer: Peer, recipe: Recipe) -> int:
    """Install a peer's pinned client (`recipe`) into the framework cache, as a framework is installed."""
    if why := peer.unavailable():
        print(f"{peer.name}: {why}", file=sys.stderr)
        return 1
    if cached(recipe) is None:
        print(f"{peer.name}: installing {recipe.version} (log: {build_log_path(recipe)})", file=sys.stderr, flush=True)
    try:
        inst = ensure_installed(recipe)
    except InstallError as exc:
        print(f"{peer.name}: FAILED: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(inst.to_json()), flush=True)
    return 0


def _installed(recipe: Recipe, pinned: bool) -> dict:
    """What is installed for this recipe: a user's own install first, then the cache (as cells see it)."""
    chosen = select(recipe, pinned=pinned)
    try:
        found = recipe.external() or cached(chosen.recipe)
    except InstallError as exc:  # e.g. an env var pointing at something that is not an executable
        return {"installed": False, "error": str(exc)}
    if found is None:
        return {"installed": False, "version_choice": chosen.choice}
    report = {"installed": True, "version": found.version, "source": found.source}
    return {**report, "version_choice": chosen.choice} if found.source == "cache" else report


def doctor_report(adapter: Adapter, pinned: bool = False) -> dict:
    tag = adapter.platform_here()
    platforms = sorted(adapter.platforms)
    # The command for this host where the framework runs here, else for the first platform it runs on.
    target = tag or platforms[0]
    recipe = adapter.recipe_for(target)
    report: dict = {
        "framework": adapter.name,
        "platforms": platforms,
        "runnable": tag is not None,
        "platform": tag,
        "this_platform": this_platform(),
        "install_command": recipe.install_hint(),
        "install_command_for": target,
        "install_by_platform": {plat: adapter.recipe_for(plat).install_hint() for plat in platforms},
        # The recipe's update steps as commands, where it has them (scripted installs).
        "update_commands": recipe.update_script() if isinstance(recipe, ScriptedInstall) else [],
    }
    if tag is not None:
        report.update(_installed(recipe, pinned))
    if adapter.notes:
        report["notes"] = adapter.notes
    return report


def _doctor(args: argparse.Namespace) -> int:
    reports = [doctor_report(adapter, args.pinned) for adapter in adapters.registry().values()]
    if args.json:
        print(json.dumps({"host_platforms": list(host_platforms()), "frameworks": reports}, indent=1))
        return 0
    rows = [("framework", "platforms", "runnable here", "installed", "install")]
    for r in reports:
        runnable = f"yes ({r['platform']})" if r["runnable"] else f"no (this is {r['this_platform']})"
        if not r["runnable"]:
            installed = "-"
        elif r["installed"]:
            updated = ", updated" if r.get("version_choice") == "updated" else ""
            installed = f"{r['version']} ({r['source']}{updated})"
        else:
            installed = "error: " + r["error"] if "error" in r else "no"
        how = r["install_command"] if r["runnable"] else f"[{r['install_command_for']}] {r['install_command']}"
        rows.append((r["framework"], ",".join(r["platforms"]), runnable, installed, how))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)) + "  " + row[4])
    return 0


# Subcommands whose options their own modules parse: name -> (module, one-line help).
OWN_OPTIONS = {
    "report": ("bench.reports.rebuild", "rebuild comparison.json, REPORT.md and plots from result files alone "
               "(--as TOOL: print REPORT.md under vLLM's, AIPerf's, guidellm's or SiliconBench's metric names)"),
    "weekly": ("bench.cli.weekly", "the unattended weekly run: update, chat, agent, reports, weekly/<date> branch"),
    "nightly": ("bench.cli.nightly",
                "the nightly workflow's steps: job matrix, tracking issue, nightly/<date> branch"),
    "clean": ("bench.reports.cleanup", "delete this machine's stale results; refuse (and name) anything else"),
    "eval": ("bench.cli.eval", "eval rows without running them: precheck (ready?), locate (which table lines)"),
    "serve": ("bench.cli.serve", "one framework's server in the foreground, exactly as a cell starts it"),
    "update": ("bench.cli.update",
               "install each framework's newest release beside the pinned one (--dry-run: only say)"),
    "import": ("bench.cli.imports", "convert SiliconBench's result files into cellbench results labelled imported"),
    "compare": ("bench.cli.decisions.compare",
                "OLD NEW: per cell, level and figure: regression, improvement, no detectable change, cannot tell"),
    "site": ("bench.cli.site", "RESULTS OUT: one static site over a results tree: tables, sparklines, trends across "
             "weeks with compare's decisions"),
    "noise": ("bench.cli.decisions.noise",
              "FRAMEWORK: measure this machine's noise floor of one cell (its spread between identical runs)"),
    "perf": ("bench.perf.compare", "perf compare: cellbench's client beside the peers' on one null server; "
             "perf ceiling: its most chunks and requests a second"),
}


def main(argv: list[str] | None = None) -> int:
    """Run one `cellbench` command. A reader that stops early (`cellbench doctor | head -3`) ends
    the command quietly with 141 (128 + SIGPIPE), as a Unix tool killed by the pipe would."""
    try:
        return _dispatch(argv)
    except MachineSlugError as exc:  # a variable naming the machine's folder: every command files by it
        print(f"cellbench: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # Python flushes stdout again at exit and would report the same broken pipe there.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


def _dispatch(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="cellbench")
    sub = parser.add_subparsers(dest="command", required=True)
    install = sub.add_parser("install", help="install frameworks into the cellbench cache")
    install.add_argument("frameworks", nargs="*", help="default: every framework that runs on this platform; "
                         "aiperf and guidellm: those peers' clients, for cellbench perf compare")
    install.add_argument("--pinned", action="store_true", help="the adapters' versions, not recorded updates")
    install.set_defaults(func=_install)
    doctor = sub.add_parser("doctor", help="which frameworks run here, what is installed, how to install the rest")
    doctor.add_argument("--json", action="store_true", help="print the report as JSON")
    doctor.add_argument("--pinned", action="store_true", help="the adapters' versions, not recorded updates")
    doctor.set_defaults(func=_doctor)
    for name, (_, help_text) in OWN_OPTIONS.items():
        sub.add_parser(name, add_help=False, help=help_text).set_defaults(func=None)
    args, rest = parser.parse_known_args(argv)
    if args.command in OWN_OPTIONS:  # their options are the modules' own
        module = importlib.import_module(OWN_OPTIONS[args.command][0])
        given = list(argv if argv is not None else sys.argv[1:])
        given.remove(args.command)
        return module.main(given)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
