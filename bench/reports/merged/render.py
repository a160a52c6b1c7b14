"""The merged report of several machines: merged.json's shape, and MERGED.md and its plots
(index.html: bench.reports.merged.index).

bench.reports.merged.gather collects a `Merged` document from the result folders of several machines;
this module declares that document's types and renders it. Everything here reads the document
alone (never a result file), so the three views cannot disagree with merged.json.

A cell whose result does not stand ok (bench.reports.standing: its verdict, interrupted, imported,
not from its machine's newest run) says so in its text, is hatched and labelled in the plots, and
takes no place in *Between machines*. The document
types live here rather than in bench.reports.merged.gather because merge's CLI calls these renderers:
the types sit in the lower module so the two do not import each other.

A cell's numbers are always those of one machine's own result: a table has a column per
machine, and a machine that sent nothing for a model and split keeps its column, marked
`no result from <machine>` in every row, so a gap is never mistaken for a machine that was
not expected.

Like with like (docs/results.md): cells ("<framework> on <machine>") whose request settings differ
get a Differing settings row, their settings' mark (bench.reports.drawing.unlike), a note, marked plots.
"""

from __future__ import annotations

from typing import Any, TypedDict

from bench.core.result.model import RunConfig
from bench.reports import drawing, markdown
from bench.reports.comparison import setting_differences
from bench.reports.merged import machines
from bench.reports.standing import Standing, StandingBlock, shown

MERGED_MD = "MERGED.md"
INDEX_HTML = "index.html"
PLOTS_DIR = "plots"
BY_MACHINE = "_by_machine.png"
VS_CONCURRENCY = "_vs_concurrency.png"
# The verdicts of cells with no result and no journal entry (source "missing"): the machine sent
# nothing for the table, or it sent the table without this framework.
NO_RESULT = "no result"
NOT_RUN = "not run"


class MergedCell(TypedDict):
    """One framework on one machine: its chosen result, its journal entry, or why there is none."""

    source: str  # "result", "journal" or "missing"
    verdict: str
    reason: str
    output_tps: dict[str, float | None]  # output tok/s by concurrency level (JSON keys are strings)
    run_id: str | None
    harness_commit: str | None  # null: a result written before the harness block, or not a checkout
    harness_dirty: bool | None
    framework_version: str | None
    file: str | None  # the file read (result or journal), relative to the folder it came from
    imported: str | None  # `imported (SiliconBench)`: a result converted from another benchmark's file
    run_config: RunConfig | None  # the result's: its Differing settings against the table's other cells
    tps_estimates: dict[str, dict[str, Any]]  # output tok/s by level, as judged (bench.reports.between)
    standing: StandingBlock | None  # the result's, Standing.to_json(); None for a cell without a result
    # the server's peak memory in MiB by concurrency level, where read; the fidelity as REPORT.md's table
    # says it (bench.reports.lenses); both absent from a merged.json of an earlier cellbench
    peak_memory_mib: dict[str, float]
    fidelity: str | None


class IgnoredEntry(TypedDict):
    machine: str
    file: str
    reason: str


class MergedTable(TypedDict):
    """One model and split: rows are frameworks, columns machines."""

    model: str
    split: str
    machines: list[str]
    frameworks: list[str]
    missing: dict[str, str]  # machine -> "no result from <machine>"
    cells: dict[str, dict[str, MergedCell]]  # framework -> machine -> cell
    ignored: list[IgnoredEntry]  # result files the store's selection left out, with why


class SourceFolder(TypedDict):
    """A results folder a merge read, and the machines whose results it held."""

    dir: str
    machines: list[str]


class Failure(TypedDict):
    model: str
    split: str
    machine: str
    framework: str
    verdict: str
    reason: str


class Missing(TypedDict):
    model: str
    split: str
    machine: str
    reason: str


class Merged(TypedDict):
    """merged.json: every table, the failures and the gaps of one merge."""

    schema_version: int
    generated_at: str
    sources: list[SourceFolder]
    expected: list[str]  # --expect, in its order
    machines: list[str]  # every column: the expected machines, then the others found, sorted
    tables: list[MergedTable]
    failures: list[Failure]
    missing: list[Missing]


def _level_tps(cell: MergedCell) -> list[tuple[int, float | None]]:
    return sorted((int(level), tps) for level, tps in cell["output_tps"].items())


def peak_tps(cell: MergedCell) -> float | None:
    """The highest output tok/s over the cell's levels; None when it has no number."""
    values = [tps for _, tps in _level_tps(cell) if tps is not None]
    return max(values) if values else None


def cell_standing(cell: MergedCell) -> Standing:
    """The standing of a cell's result (a cell without one, or of an earlier merged.json: ok)."""
    return Standing.from_json(found) if (found := cell.get("standing")) else Standing()


def cell_text(cell: MergedCell) -> str:
    """e.g. `ok · c=1 173.8 · c=8 218.2 tok/s · peak memory c=1 181 · c=8 190 MiB · fidelity: 16/16 alike
    ...`, `degraded · c=1 ...`, `ok, not from this run (run X of 2026-12-01) · ...`, `wrong-model (served
    M) · ...`, `failed: <reason>` or `no result from m4`: speed, memory and fidelity side by side."""
    if cell["source"] == "missing":
        return cell["reason"] if cell["verdict"] == NO_RESULT else cell["verdict"]
    if cell["source"] == "journal" or not cell["output_tps"]:
        return f"{cell['verdict']}: {cell['reason']}"
    levels = " · ".join(f"c={c} {markdown.NULL if t is None else f'{t:.1f}'}" for c, t in _level_tps(cell))
    marks = cell_standing(cell).marks
    head = ", ".join([next((m.short() for m in marks if m.kind == cell["verdict"]), cell["verdict"]),
                      *(m.short() for m in marks if m.kind != cell["verdict"])])
    if not marks and (label := cell.get("imported")):  # an earlier merged.json: no standing
        head += f", {label}"
    text = f"{head} · {levels} tok/s"
    if memory := sorted((int(c), mib) for c, mib in (cell.get("peak_memory_mib") or {}).items()):
        text += " · peak memory " + " · ".join(f"c={c} {mib:.0f}" for c, mib in memory) + " MiB"
    if fidelity := cell.get("fidelity"):
        text += f" · fidelity: {fidelity}"
    return text


def commit_text(cell: MergedCell) -> str:
    """The harness commit's first 12 characters, `+dirty` when the checkout had changes."""
    if cell["harness_commit"] is None:
        return markdown.NULL
    return cell["harness_commit"][:12] + ("+dirty" if cell["harness_dirty"] else "")


def _provenance_rows(table: MergedTable) -> list[list[str]]:
    """(machine, framework, run id, harness commit, framework version, file) of every cell read from a file."""
    rows = []
    for machine in table["machines"]:
        for fw in table["frameworks"]:
            cell = table["cells"][fw][machine]
            if cell["source"] != "missing":
                run = (cell["run_id"] or markdown.NULL) + (f" ({cell['imported']})" if cell.get("imported") else "")
                rows.append([machine, fw, run, commit_text(cell),
                             cell["framework_version"] or markdown.NULL, cell["file"] or markdown.NULL])
    return rows


def _configs(table: MergedTable) -> dict[str, RunConfig]:
    """Each cell's run_config by "<framework> on <machine>", for the cells with a result."""
    return {f"{fw} on {m}": config for fw in table["frameworks"] for m in table["machines"]
            if (config := table["cells"][fw][m].get("run_config")) is not None}


def _unlike_row(table: MergedTable) -> list[str] | None:
    """The Differing settings row: per machine, each of its cells' values of the differing keys."""
    differing = setting_differences(_configs(table))
    if not differing:
        return None
    column = {m: " · ".join(f"{fw}: " + "; ".join(f"{k}={v[name]}" for k, v in differing.items())
                            for fw in table["frameworks"] if (name := f"{fw} on {m}") in next(iter(differing.values())))
              for m in table["machines"]}
    return [markdown.UNLIKE_ROW, *(column[m] or markdown.MISSING_LEVEL for m in table["machines"])]


def _marked_text(table: MergedTable, found: drawing.Unlike, fw: str, machine: str) -> str:
    return drawing.marked(f"{fw} on {machine}", found, cell_text(table["cells"][fw][machine]))


# ------------------------------------------------------------------ plots


def _title(table: MergedTable) -> str:
    return f"{table['model']} ({table['split']})"


def _color(names: list[str], name: str) -> str:
    """A colour by position in the table's list, so a framework or machine keeps its colour in every panel."""
    return f"C{names.index(name) % 10}"


def by_machine_png(table: MergedTable) -> bytes | None:
    """Grouped bars: per framework, one bar per machine of its peak output tok/s; None when no cell
    has a number. A cell without a number has no bar, so a gap is never drawn as a zero."""
    peaks = {(fw, m): p for fw in table["frameworks"] for m in table["machines"]
             if (p := peak_tps(table["cells"][fw][m])) is not None}
    if not peaks:
        return None
    frameworks = [fw for fw in table["frameworks"] if any(k[0] == fw for k in peaks)]
    machines = [m for m in table["machines"] if any(k[1] == m for k in peaks)]
    fig = drawing.figure(max(6.0, 2 + 0.5 * len(frameworks) * len(machines)), 4.5)
    ax = fig.add_subplot()
    width = 0.8 / len(machines)
    found = drawing.unlike(_configs(table))
    for k, machine in enumerate(machines):
        xs = [i + (k - (len(machines) - 1) / 2) * width for i, fw in enumerate(frameworks) if (fw, machine) in peaks]
        drawn = [fw for fw in frameworks if (fw, machine) in peaks]
        marks = [cell_standing(table["cells"][fw][machine]) for fw in drawn]
        bars = ax.bar(xs, [peaks[fw, machine] for fw in drawn], width, label=machine,
                      color=_color(table["machines"], machine), hatch=["" if m.ok else "//" for m in marks])
        if found.marks or not all(m.ok for m in marks):  # each bar's settings mark and standing on top of it
            ax.bar_label(bars, [" ".join(filter(None, (found.marks.get(f"{fw} on {machine}", ""), m.tags)))
                                for fw, m in zip(drawn, marks, strict=True)], fontsize=7)
    ax.set_xticks(range(len(frameworks)), frameworks)
    ax.set_ylabel("peak output throughput (tok/s)")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="best", title="machine")
    ax.set_title(f"Peak output throughput by machine — {_title(table)}", fontsize=10)
    drawing.note_unlike(fig, found)
    return drawing.png(fig)


def vs_concurrency_png(table: MergedTable) -> bytes | None:
    """One panel per machine with numbers: output tok/s against concurrency, a line per framework
    (levels without a number are left out). Panels share the y axis: machines are compared."""
    series = {m: {fw: pts for fw in table["frameworks"]
                  if (pts := [(c, t) for c, t in _level_tps(table["cells"][fw][m]) if t is not None])}
              for m in table["machines"]}
    series = {m: by_fw for m, by_fw in series.items() if by_fw}
    if not series:
        return None
    found = drawing.unlike(_configs(table))
    fig = drawing.figure(4.2 * len(series) + 1, 4.2)
    axes = fig.subplots(1, len(series), sharey=True, squeeze=False)[0]
    for ax, (machine, by_fw) in zip(axes, series.items(), strict=True):
        for fw, points in by_fw.items():
            mark = cell_standing(table["cells"][fw][machine])  # a marked cell: dashed, its marks in its label
            ax.plot([c for c, _ in points], [t for _, t in points], marker="o", linestyle="-" if mark.ok else "--",
                    label=drawing.marked(f"{fw} on {machine}", found, shown.label(fw, mark)),
                    color=_color(table["frameworks"], fw))
        drawing.log2_axis(ax, sorted({c for pts in by_fw.values() for c, _ in pts}))
        ax.grid(True, alpha=0.3)
        ax.set_title(machine, fontsize=10)
        ax.legend(loc="best", fontsize=8)
    axes[0].set_ylim(bottom=0)  # after every panel is drawn: the shared axis then spans all machines
    axes[0].set_ylabel("output throughput (tok/s)")
    fig.suptitle(f"Output throughput against concurrency — {_title(table)}", fontsize=10)
    drawing.note_unlike(fig, found)
    return drawing.png(fig)


def plot_images(merged: Merged) -> dict[str, bytes]:
    """Every figure of the report by file name (`<model>_<split>_by_machine.png`, `..._vs_concurrency.png`)."""
    images: dict[str, bytes] = {}
    for table in merged["tables"]:
        stem = f"{table['model']}_{table['split']}"
        for suffix, draw in ((BY_MACHINE, by_machine_png), (VS_CONCURRENCY, vs_concurrency_png)):
            if (png := draw(table)) is not None:
                images[stem + suffix] = png
    return images


def _plots_of(table: MergedTable, images: dict[str, bytes]) -> list[str]:
    stem = f"{table['model']}_{table['split']}"
    return [name for name in (stem + BY_MACHINE, stem + VS_CONCURRENCY) if name in images]


# ------------------------------------------------------------------ MERGED.md


def _sent_nothing(merged: Merged) -> list[str]:
    found = {m for source in merged["sources"] for m in source["machines"]}
    return [m for m in merged["expected"] if m not in found]


def _md_header(merged: Merged) -> list[str]:
    expected = ", ".join(merged["expected"]) or "none given (--expect)"
    return [
        "# cellbench merged report", "",
        f"Generated {merged['generated_at']} from the result files of each machine (the same data is in "
        "merged.json). Each cell is that machine's own newest result; numbers are never pooled across machines.",
        "",
        "## Sources", "",
        *markdown.table(["Folder", "Machines"], [[s["dir"], ", ".join(s["machines"])] for s in merged["sources"]]),
        "",
        f"Expected machines: {expected}.", "",
        f"Sent nothing: {', '.join(_sent_nothing(merged)) or 'none'}.", "",
    ]


def _md_table(table: MergedTable, images: dict[str, bytes]) -> list[str]:
    found = drawing.unlike(_configs(table))
    rows = [[fw, *(_marked_text(table, found, fw, m) for m in table["machines"])] for fw in table["frameworks"]]
    unlike = _unlike_row(table)
    provenance = ["Machine", "Framework", "Run id", "Harness commit", "Framework version", "File"]
    return [
        f"## {table['model']} — {table['split']}", "",
        *markdown.table(["Framework", *table["machines"]], [unlike, *rows] if unlike else rows), "",
        *([markdown.cell(unlike_note(found)), ""] if found.note else []), *machines.machines_lines(table),
        f"### Provenance — {table['model']} {table['split']}", "",
        *markdown.table(provenance, _provenance_rows(table)), "",
        *[f"Ignored on {i['machine']}: {markdown.cell(i['file'])}: {markdown.cell(i['reason'])}\n"
          for i in table["ignored"]],
        *[f"![{name}]({PLOTS_DIR}/{name})\n" for name in _plots_of(table, images)],
    ]


def unlike_note(found: drawing.Unlike) -> str:
    return f"{found.note} Cells with different marks may differ by their settings, not by framework or machine."


def render_markdown(merged: Merged, images: dict[str, bytes]) -> str:
    """MERGED.md: the header, a section per model and split, then the failures and the gaps."""
    failures = [f"{f['model']} {f['split']} on {f['machine']}: {f['framework']} {f['verdict']}: {f['reason']}"
                for f in merged["failures"]]
    missing = [f"{m['model']} {m['split']}: no result from {m['machine']} ({m['reason']})" for m in merged["missing"]]
    lines = [*_md_header(merged), *[line for t in merged["tables"] for line in _md_table(t, images)]]
    lines += markdown.bullets("Failures", failures, "None: every cell is ok or skipped.")
    lines += markdown.bullets("Missing", missing, "None: every machine sent every model and split.")
    return "\n".join(lines)
