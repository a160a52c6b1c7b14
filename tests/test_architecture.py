"""The package's shape: layers import only downwards, no import cycles, small modules and folders,
one name per class.

The layers, lowest first. A module may import its own layer and any layer below it; a cycle
between modules (of one layer or several) fails too, because it hides which one is the base.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = [
    "bench.base",      # paths, atomic files, clock, git
    "bench.host",      # the machine and its limits
    "bench.core",      # records, SSE, metrics, verdicts, the result model
    "bench.setup",     # adapter contract, installs, profiles, prompts, tiny model
    "adapters",        # one declarative module per framework
    "bench.imports",   # other benchmarks' result files as cellbench results: they read the model profiles and
                       # adapters (weight format) and write through the core's store; nothing below needs them
    "bench.load",      # the load generator
    "bench.run",       # one cell: servers, levels, verdict, result
    "bench.reports",   # everything read back from result files
    "bench.eval",      # eval rows and reference tables
    "bench.plugins",   # the pytest layer
    "bench.perf",      # measurements of the harness itself
    "bench.nightly",   # the nightly job across machines: matrix, tracking issue, branch
    "bench.cli",       # the cellbench command
    "fixtures",        # the pytest fixtures a cell or an eval row takes: top of the stack, so nothing in bench/
                       # (engine, plugins, CLI) can need them; they use bench.plugins' settings and bench.run
]
ROOM_LINES = 350  # a module longer than this says why, in a docstring line "Size: <reason>"
ROOM_MODULES = 8  # a folder of more modules says why, the same way, in its __init__.py
SIZE_REASON = re.compile(r"^Size: \S.{10,}$", re.M)
# Rooms over the limits with no reason yet, each with the size it may not pass (lines, or modules
# of a folder): each is to be split by what it holds (issue 39). The list only shrinks: a room
# that fits, or that gives its reason, must leave it.
TO_SPLIT: dict[str, int] = {}  # none waits now


def _modules() -> dict[str, Path]:
    found = {}
    for top in ("bench", "adapters", "fixtures"):
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """Every project module `path` imports, at any depth in the file (lazy imports count)."""
    out: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                out.add(target)
    return out


def _layer(name: str) -> int | None:
    for rank, layer in enumerate(LAYERS):
        if name == layer or name.startswith(layer + "."):
            return rank
    return None


MODULES = _modules()
GRAPH = {name: _imports(path, name, set(MODULES)) for name, path in MODULES.items()}


def test_every_package_module_has_a_layer():
    unplaced = [n for n in MODULES if _layer(n) is None and n not in {"bench", "bench.test_cells", "bench.test_eval"}]
    assert unplaced == [], f"modules outside every layer: {unplaced}; add their package to LAYERS"


def test_no_module_imports_a_higher_layer():
    upward = sorted(
        f"{name} ({LAYERS[_layer(name)]}) imports {dep} ({LAYERS[_layer(dep)]})"
        for name, deps in GRAPH.items() if _layer(name) is not None
        for dep in deps if _layer(dep) is not None and _layer(dep) > _layer(name)
    )
    assert upward == []


def test_no_import_cycle():
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(GRAPH.get(node, ())):
            if state.get(dep) == 1:
                cycles.append(" -> ".join(stack[stack.index(dep):] + [dep]))
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(GRAPH):
        if node not in state:
            visit(node)
    assert cycles == []


def _rooms() -> tuple[dict[str, int], dict[str, int]]:
    """(module -> lines, folder -> modules) of every module of bench/, adapters/, fixtures/ and prompts/."""
    paths = [*MODULES.values(), *sorted((ROOT / "prompts").glob("*.py"))]
    lines = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in paths if p.name != "__init__.py"}
    folders: dict[str, int] = {}
    for name in lines:
        folder = name.rpartition("/")[0]
        folders[folder] = folders.get(folder, 0) + 1
    return lines, folders


def _reason(path: Path) -> bool:
    """Whether a module (or a folder's __init__.py) says in its docstring why it is as large as it is."""
    doc = ast.get_docstring(ast.parse(path.read_text())) if path.is_file() else None
    return bool(doc and SIZE_REASON.search(doc))


def test_every_room_fits_or_says_why():
    lines, folders = _rooms()
    over = {name for name, n in lines.items() if n > ROOM_LINES} | {f for f, n in folders.items() if n > ROOM_MODULES}
    silent = {name for name in over
              if not _reason(ROOT / name if name.endswith(".py") else ROOT / name / "__init__.py")}
    unlisted = {name: lines.get(name) or folders[name] for name in silent - set(TO_SPLIT)}
    assert unlisted == {}, (f"over {ROOM_LINES} lines or {ROOM_MODULES} modules: split by what it holds, or say why "
                            "in its docstring (a line 'Size: <reason>')")
    assert set(TO_SPLIT) - silent == set(), "these fit now, or say why: take them off TO_SPLIT"


def test_no_room_waiting_to_be_split_grows():
    lines, folders = _rooms()
    sizes = {**lines, **folders}
    grown = {name: f"{sizes[name]} > {ceiling}" for name, ceiling in TO_SPLIT.items() if sizes.get(name, 0) > ceiling}
    assert grown == {}, "a room waiting to be split grew: split it now"


def test_no_class_name_is_defined_twice():
    """Two classes of one name (top-level or nested, private ones too) make an import ambiguous to
    a reader: which `Machine` is this? Each class gets a name that says which thing it is."""
    where: dict[str, list[str]] = {}
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(f"{name}:{node.lineno}")
    twice = {cls: places for cls, places in sorted(where.items()) if len(places) > 1}
    assert twice == {}, f"class names defined more than once: {twice}"


# What PyPI's unrelated `fixtures` distribution (testing-cabal) installs under fixtures/.
TESTING_CABAL_FIXTURES = {"__init__", "_version", "callmany", "fixture", "testcase", "tests", "_fixtures"}


def test_installing_cellbench_cannot_overwrite_another_fixtures_package():
    """fixtures/ is a namespace package: cellbench ships no fixtures/__init__.py, and none of its
    modules takes a name testing-cabal's `fixtures` installs, so a pip install of one never
    writes over a file of the other (pyproject.toml says why)."""
    shipped = {path.stem if path.is_file() else path.name for path in (ROOT / "fixtures").iterdir()
               if path.name != "__pycache__"}
    assert "__init__" not in shipped, "fixtures/__init__.py would overwrite testing-cabal's on install"
    assert shipped & TESTING_CABAL_FIXTURES == set()


# tests/ folders that hold no package's tests: whole cells end to end (on a GPU too), and shared code and files.
TEST_FOLDERS_BEYOND_PACKAGES = {"cells", "gpu", "support", "data"}


def test_the_tests_mirror_the_packages():
    """tests/<package>/ holds the tests of bench/<package>/ (or adapters/; the plugins' folder those
    of fixtures/ too); only the checks of the whole project stay in tests/ itself (tests/README.md)."""
    packages = {p.name for p in (ROOT / "bench").iterdir() if (p / "__init__.py").is_file()} | {"adapters"}
    folders = {p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders - packages - TEST_FOLDERS_BEYOND_PACKAGES == set(), "a tests/ folder named after no package"
    loose = sorted(p.name for p in (ROOT / "tests").glob("test_*.py"))
    assert loose == ["test_architecture.py", "test_docs.py", "test_workflows.py"], "a test file outside its package"
    names = [p.name for p in (ROOT / "tests").rglob("test_*.py")]
    assert len(names) == len(set(names)), "two test files of one name: pytest imports tests/ files by basename"
