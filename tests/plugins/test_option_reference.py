"""docs/options.md and `pytest --help` say the same options and defaults as the declarations, and
each shared default is stated once (bench/base/defaults.py) and read from there."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from bench.base.defaults import DEFAULT_LEVELS, DEFAULT_MODEL, DEFAULT_REQUESTS, SPLITS, levels_text
from bench.base.paths import PROJECT_ROOT
from bench.cli import serve
from bench.cli.main import main as cli_main
from bench.plugins.opts import reference
from bench.plugins.opts.build import GROUPS, every_option
from bench.plugins.opts.eval_settings import EvalSettings
from bench.plugins.opts.settings import cell_option
from bench.plugins.opts.spec import declared

DOC = PROJECT_ROOT / "docs" / "options.md"


def test_docs_options_md_is_what_the_generator_writes():
    assert DOC.read_text() == reference.reference(), (
        f"docs/options.md is not what the option declarations say; regenerate it: {reference.COMMAND}")


def _help_defaults(text: str) -> dict[str, dict[str, str]]:
    """`pytest --help`'s cellbench groups: group description -> flag -> the text of its `[default]`."""
    descriptions = {description for (_, description), _ in GROUPS}
    groups: dict[str, dict[str, list[str]]] = {}
    entries: dict[str, list[str]] | None = None
    flag = ""
    for line in text.splitlines():
        if not line.startswith(" "):
            entries = groups.setdefault(line.rstrip(":"), {}) if line.rstrip(":") in descriptions else None
        elif entries is not None and (start := re.match(r"  (--[\w-]+)(?:=\S+)?(?:\s+(.*))?$", line)):
            flag = start.group(1)
            entries[flag] = [start.group(2) or ""]
        elif entries is not None and line.strip():
            entries[flag].append(line.strip())
    return {group: {flag: _brackets(" ".join(p for p in parts if p)) for flag, parts in entries.items()}
            for group, entries in groups.items()}


def _brackets(help_text: str) -> str:
    """The text of the `[...]` that ends a help text ('' when it has none)."""
    if not help_text.endswith("]"):
        return ""
    depth = 0
    for i in range(len(help_text) - 1, -1, -1):
        depth += {"]": 1, "[": -1}.get(help_text[i], 0)
        if depth == 0:
            return help_text[i + 1:-1]
    return ""


def _reference_defaults(text: str) -> dict[str, dict[str, str]]:
    """docs/options.md's tables: section title -> flag -> its Default column."""
    out: dict[str, dict[str, str]] = {}
    section = ""
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:]
            out[section] = {}
        elif line.startswith("| `--"):
            cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
            out[section][cells[0].strip("`")] = cells[2].strip("`").replace("\\|", "|")
    return out


@pytest.mark.session
def test_pytest_help_lists_the_reference_flags_with_the_same_defaults():
    env = {**os.environ, "COLUMNS": "10000"}  # one line per option: a wrap would split words at hyphens
    proc = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=300, check=False, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    helped = _help_defaults(proc.stdout)
    documented = _reference_defaults(DOC.read_text())
    assert len(documented) == len(GROUPS) and all(helped.values()), (list(documented), list(helped))
    for (group, in_help), (section, in_doc) in zip(helped.items(), documented.items(), strict=True):
        assert in_help == in_doc, f"`pytest --help`'s {group!r} and docs/options.md's {section!r} differ"
    assert sum(map(len, helped.values())) == len(every_option())


def test_every_option_is_declared_once_and_has_a_default_in_its_help():
    names = [option.flag for option in every_option()]
    assert len(names) == len(set(names)) == 70
    for option in every_option():
        assert option.help_text().endswith(f"[{option.default_text()}]"), option.flag
    assert all(f in dict(declared(EvalSettings)) for f in EvalSettings.__dataclass_fields__)


def test_help_defaults_come_from_the_shared_constants():
    by_flag = {option.flag: option for option in every_option()}
    assert by_flag["--concurrency"].help_text().endswith(f"[{levels_text(DEFAULT_LEVELS)}]")
    assert levels_text() == "1,8,16"
    assert by_flag["--requests"].default == DEFAULT_REQUESTS
    assert by_flag["--requests"].help_text().endswith(f"[{DEFAULT_REQUESTS}]")
    assert by_flag["--model"].default is None, "not given: APPLEBENCH_MODEL, else the default (build.py)"
    assert by_flag["--model"].help_text().endswith(f"[$APPLEBENCH_MODEL, else {DEFAULT_MODEL}]")


def test_serve_defaults_are_the_cells_defaults(monkeypatch: pytest.MonkeyPatch):
    parsed: list = []

    def serve_nothing(args) -> int:
        parsed.append(args)
        return 0

    monkeypatch.setattr(serve, "serve", serve_nothing)
    assert serve.main(["llamacpp"]) == 0
    (args,) = parsed
    # --model not given: None, as the cells' option, so APPLEBENCH_MODEL, else the default, chooses (bench.cli.choice)
    assert (args.concurrency, args.split, args.model) == (max(DEFAULT_LEVELS), SPLITS[0], None)


# The `cellbench` commands that take a cell option too, each with the options it shares.
SHARED = {("serve",): ("--model", "--port", "--pinned", "--api-key"),
          ("noise",): ("--model", "--results-dir"),
          ("weekly",): ("--model", "--results-dir"),
          ("weekly", "skip"): ("--model", "--results-dir"),
          ("compare",): ("--results-dir",),
          ("import", "siliconbench"): ("--results-dir",)}


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("command", SHARED, ids=" ".join)
def test_a_command_takes_a_cell_option_with_the_cells_help(command: tuple[str, ...],
                                                           capsys: pytest.CaptureFixture[str]):
    """Its help is the cell option's (the default in brackets may say where the command looks)."""
    with pytest.raises(SystemExit):
        cli_main([*command, "--help"])
    shown = _words(capsys.readouterr().out)
    for flag in SHARED[command]:
        assert _words(cell_option(flag).help) in shown, flag


def test_a_command_refuses_a_cell_options_value_in_its_words(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exit_:
        cli_main(["serve", "llamacpp", "--port", "70000"])
    assert exit_.value.code == 2
    assert ("argument --port: takes a port number from 0 (any free port) to 65535, got 70000"
            in capsys.readouterr().err), "pytest's words for the same value: --port takes ..., got 70000"


def test_only_the_settings_builder_reads_the_command_line():
    """Every consumer reads settings(config).<field>; `getoption` is the builder's alone, in the engine,
    the adapters and the fixtures wherever they live."""
    packages = [PROJECT_ROOT / name for name in ("bench", "adapters", "fixtures") if (PROJECT_ROOT / name).is_dir()]
    readers = sorted(str(path.relative_to(PROJECT_ROOT)) for package in packages for path in package.rglob("*.py")
                     if re.search(r"\.getoption\b", path.read_text()))
    assert readers == ["bench/plugins/opts/build.py"], readers


def test_the_reference_is_one_short_row_per_option():
    rows = [line for line in DOC.read_text().splitlines() if line.startswith("| `--")]
    assert len(rows) == len(every_option())
    long = [row.split("|")[1] for row in rows if len(row.split(" | ")[-1]) > 100]
    assert long == [], "give these options a `brief` for docs/options.md"
    assert reference.COMMAND in DOC.read_text()
