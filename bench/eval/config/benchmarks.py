"""`--benchmarks`: the names that select an eval config's rows by their benchmark file.

A row's benchmark is its file's stem without `benchmark_` (`omni_mmsu` for
benchmark_omni_mmsu.py). sglang-omni's own runner, whose users type `/running-eval-suite
--benchmarks mmsu,qwen_seedtts`, names its six files otherwise; `ALIASES` declares those names
here, and only here, so the same command line selects the same rows in cellbench. An alias never
shadows a file's own name: in a config that also has a benchmark_mmsu.py, `mmsu` is that file.
`--benchmarks help` (pytest, `cellbench eval precheck|locate`) prints `listing`: every name the
config accepts, with its files and rows.
"""

from __future__ import annotations

from pathlib import Path

from bench.eval.config.schema import EvalConfigError, EvalRow

# A file's own name -> the names sglang-omni's runner gives it (SKILL.md: "Use omni_seedtts /
# qwen_seedtts for Qwen3-Omni SeedTTS rows and tts_seedtts / s2pro_seedtts for S2-Pro rows"; its
# Qwen3-Omni files drop their `omni_`).
ALIASES: dict[str, tuple[str, ...]] = {
    "omni_mmsu": ("mmsu",),
    "omni_mmmu": ("mmmu",),
    "omni_videomme": ("videomme",),
    "omni_videoamme": ("videoamme",),
    "omni_seedtts": ("qwen_seedtts",),
    "tts_seedtts": ("s2pro_seedtts",),
}
ALL = "all"
HELP = "help"  # `--benchmarks help`: list the names instead of running


def wanted(benchmarks: str) -> set[str]:
    return {name.strip() for name in benchmarks.split(",") if name.strip()} - {ALL}


def wants_listing(benchmarks: str) -> bool:
    return HELP in wanted(benchmarks)


def accepted(rows: tuple[EvalRow, ...] | list[EvalRow]) -> dict[str, list[EvalRow]]:
    """Every name `--benchmarks` takes for these rows, file names first, then aliases, each with
    its rows in config order."""
    names: dict[str, list[EvalRow]] = {}
    for row in rows:
        names.setdefault(row.benchmark, []).append(row)
    own = set(names)
    for row in rows:
        for alias in ALIASES.get(row.benchmark, ()):
            if alias not in own:
                names.setdefault(alias, []).append(row)
    return names


def select_rows(rows: tuple[EvalRow, ...] | list[EvalRow], benchmarks: str = ALL,
                exclude_ids: str = "") -> list[EvalRow]:
    """`--benchmarks mmsu,omni_seedtts` (file names or their aliases) and `--exclude-ids` (id
    substrings); an unknown name is an error that lists the names this config accepts."""
    kept = list(rows)
    chosen = wanted(benchmarks)
    if chosen:
        names = accepted(rows)
        unknown = sorted(chosen - set(names))
        if unknown:
            raise EvalConfigError(f"--benchmarks: unknown {', '.join(unknown)}; this config accepts "
                                  f"{', '.join(names)} (`--benchmarks {HELP}` lists each with its files and rows)")
        ids = {row.id for name in chosen for row in names[name]}
        kept = [row for row in kept if row.id in ids]
    excluded = [part.strip() for part in exclude_ids.split(",") if part.strip()]
    return [row for row in kept if not any(part in row.id for part in excluded)]


def _shown(path: Path, root: Path | None) -> str:
    return str(path.relative_to(root)) if root is not None and path.is_relative_to(root) else str(path)


def listing(rows: tuple[EvalRow, ...] | list[EvalRow], root: Path | None = None) -> list[str]:
    """`--benchmarks help`: one line per accepted name, its file(s), then one line per row."""
    names = accepted(rows)
    lines = [f"--benchmarks takes {ALL} (the default) or names joined by commas; this config accepts:"]
    for name, chosen in names.items():
        files = list(dict.fromkeys(_shown(row.file, root) for row in chosen))
        alias = f" (alias of {chosen[0].benchmark})" if name != chosen[0].benchmark else ""
        lines.append(f"  {name}{alias}: {', '.join(files)}, {len(chosen)} row(s)")
        lines += [f"      {row.id}  [{row.locate.section_substring}] {row.locate.config_substring.strip()}"
                  for row in chosen]
    return lines
