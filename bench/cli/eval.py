"""`cellbench eval`: look at an eval config's rows without running them.

- `precheck`: is this machine ready? One line per check, ✓ or ✗ with the command that fixes it
  (the same checks `pytest -m eval` runs before any server starts); exit 1 on any ✗.
- `locate [ROW_ID...]`: for each row, the table line it would replace or where it would append,
  with this machine's hardware tag (or `--hardware`), and any warning; exit 1 when a row's
  locator cannot edit its table, meets another row's Config, or its file is outside the
  config's tables root.

Both take the rows' filters as `pytest -m eval` does; `--benchmarks help` lists the names it
accepts (file names and sglang-omni's aliases) with their files and rows, and exits 0.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import adapters
from bench.eval.config.benchmarks import listing, select_rows, wants_listing
from bench.eval.config.loader import load_eval_config
from bench.eval.config.schema import EvalConfig, EvalConfigError, EvalRow, config_path
from bench.eval.gpus import parse_pool
from bench.eval.precheck import client_python, locator_clashes, run_checks
from bench.eval.row import row_edit
from bench.eval.source import hardware_tag, source_prefix
from bench.eval.tables import RowEdit, plan_edit
from bench.host.machine import detect
from bench.plugins.opts.eval_settings import EvalSettings
from bench.plugins.opts.spec import declared
from bench.setup.profiles import MODEL_VARIABLE, PROFILES_DIR, chosen_model

EVAL_OPTIONS = {name: options[0] for name, options in declared(EvalSettings)}


def _load(args: argparse.Namespace) -> EvalConfig:
    """The config `--config` names, else models/<model>/eval.yaml of the model chosen as a pytest
    session chooses it (`--model`, else APPLEBENCH_MODEL, else tiny: bench.setup.profiles.chosen_model)."""
    source = "--config"
    if args.config is None:
        args.model, source = chosen_model(args.model, os.environ)
        args.chosen = f"model {args.model} from {source}"
    else:
        args.chosen = f"config {args.config} (--config)"
    machine = detect()
    args.chosen += f", machine {machine.slug} from {machine.slug_source}"
    path = args.config or config_path(args.model, PROFILES_DIR)
    try:
        return load_eval_config(path, args.eval_root, set(adapters.registry()))
    except EvalConfigError as exc:  # a variable the user may not remember setting chose it: say so
        raise EvalConfigError(f"{source}={args.model}: {exc}" if source == MODEL_VARIABLE else str(exc)) from None


def _listed(args: argparse.Namespace, config: EvalConfig) -> bool:
    """`--benchmarks help`: print the names and their rows instead of the action."""
    if not wants_listing(args.benchmarks):
        return False
    print("\n".join(listing(config.rows, config.root)))
    return True


def _precheck(args: argparse.Namespace) -> int:
    config = _load(args)
    if _listed(args, config):
        return 0
    rows = select_rows(config.rows, args.benchmarks, args.exclude_ids)
    python = client_python(args.venv_python, config)
    print(f"eval precheck: {config.name} ({config.source}), {len(rows)} row(s), eval root {config.root}; "
          f"{args.chosen}")
    checks = run_checks(config, rows, python, parse_pool(args.gpu_pool) if args.gpu_pool else None)
    for check in checks:
        print(check.line())
    failed = sum(not check.ok for check in checks)
    print("OK" if not failed else f"FAIL: {failed} ✗")
    return 1 if failed else 0


def locate_line(row: EvalRow, hardware: str, prefix: str, config: EvalConfig) -> tuple[bool, str]:
    """What the row's edit would do to its table now (nothing is written); a row whose file is
    outside the config's tables root would edit nothing."""
    refused = config.refused(row)
    if refused:
        return False, f"✗ {row.id}  {row.file.name}  {refused}"
    clash = next((found.reason for _, found in locator_clashes(config, [row])), None)
    if clash:
        return False, f"✗ {row.id}  {row.file.name}  {clash}"
    edit: RowEdit = row_edit(row, hardware, prefix, {column: "…" for column in row.cells})
    _, outcome = plan_edit(row.file.read_text(encoding="utf-8"), edit)
    where = f"{row.file.name}:{outcome.line}" if outcome.line else row.file.name
    if outcome.status != "ok":
        return False, f"✗ {row.id}  {where}  {outcome.reason}"
    warning = f"  WARNING: {outcome.warning}" if outcome.warning else ""
    verb = "replaces" if outcome.action == "replaced" else "appends as"
    return True, f"✓ {row.id}  {where}  {verb} line {outcome.line}: {(outcome.before or edit.source).strip()}{warning}"


def _locate(args: argparse.Namespace) -> int:
    config = _load(args)
    if _listed(args, config):
        return 0
    rows = select_rows(config.rows, args.benchmarks, args.exclude_ids)
    if args.rows:
        unknown = sorted(set(args.rows) - {row.id for row in config.rows})
        if unknown:
            raise EvalConfigError(f"no row {unknown} in {config.source}")
        rows = [row for row in rows if row.id in args.rows]
    hardware = hardware_tag(detect(), args.hardware)
    print(f"eval locate: {config.name}, hardware [{hardware}], Source prefix {source_prefix(config.root)!r}; "
          f"{args.chosen}")
    results = [locate_line(row, hardware, source_prefix(config.root), config) for row in rows]
    for _, line in results:
        print(line)
    return 0 if all(ok for ok, _ in results) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cellbench eval")
    sub = parser.add_subparsers(dest="action", required=True)
    for name, func, text in (("precheck", _precheck, "is this machine ready for the config's rows?"),
                             ("locate", _locate, "which table line each row would replace, or where it appends")):
        p = sub.add_parser(name, help=text)
        p.set_defaults(func=func)
        p.add_argument("--model", default=None,
                       help="model whose models/<model>/eval.yaml to read [$APPLEBENCH_MODEL, else tiny: as a "
                            "pytest session chooses]")
        p.add_argument("--config", type=Path, default=None, help="an eval config file (eval.yaml or config.yaml)")
        p.add_argument("--eval-root", type=Path, default=None,
                       help="where `file` paths are [the config's git top level]")
        for name in ("benchmarks", "exclude_ids"):  # the row filters `pytest -m eval` takes, as it takes them
            row_filter = EVAL_OPTIONS[name]
            p.add_argument(row_filter.flag, default=row_filter.default, metavar=row_filter.metavar,
                           help=f"{row_filter.help} [{row_filter.default or 'none'}]")
    pre = sub.choices["precheck"]
    pre.add_argument("--venv-python", default=None, help="the clients' Python [$EVAL_VENV_PYTHON, default_venv_python]")
    pre.add_argument("--gpu-pool", default=None, help="GPUs rows may use, e.g. 0,1 [all]")
    loc = sub.choices["locate"]
    loc.add_argument("rows", nargs="*", metavar="ROW_ID", help="these rows only [all]")
    loc.add_argument("--hardware", default=None, help="the hardware tag [detected, e.g. H200]")
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (EvalConfigError, ValueError) as exc:
        print(f"cellbench eval: {exc}", file=sys.stderr)
        return 2
