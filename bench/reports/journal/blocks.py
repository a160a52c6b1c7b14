"""The runbook's blocks in the journal page: a skipped cell's and an OOM cell's, in SiliconBench's
Journal Format (`### <framework> (<split>)`, then `- **Field**: value` lines), which its readers
and cellbench's (bench.reports.journal.prior) both read back.

- Skipped Cells: every failure of the run triaged `skip` (bench.reports.journal.triage), a fix
  attempt that failed and was reverted among them, gets Error, Why skipped, Prior occurrences
  and Relevant logs.
- OOM Cells: every `oom` cell gets the kernel's line, its run window, the likely cause, the prior
  OOMs of the cell and the mitigation (bench.reports.journal.telemetry.oom_block, read from its
  result when it was recorded).

Drawn from the journal's state alone (typed loosely, as the page is).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.core.verdicts import Verdict
from bench.reports.journal.names import FIX_REVERTED, OOM_BLOCK, TELEMETRY
from bench.reports.journal.triage import PRIOR_FAILURE, PRIOR_OCCURRENCES, decision

SKIP = "skip — "
OOM_NOTE = ("(Cells whose server the kernel killed for memory: the OOM killer, a memory cgroup, macOS jetsam. "
            "Not auto-fixed and not re-run the same day: the framework code is likely fine; the machine ran out "
            "of memory.)")


def _error(c: Any) -> str:
    dom = c.evidence.get("dominant_error")
    if not dom:
        return c.reason
    status = f", HTTP {dom['http_status']}" if dom.get("http_status") else ""
    return f"{c.reason} [{dom['type']}{status}, {dom['count']}x]"


def _logs(c: Any, j: Any) -> str:
    ev = c.evidence
    logs = [*ev.get("server_logs", []), *([c.result_path] if c.result_path else [])]
    weekly_log = Path(j.directory) / f"weekly_{j.day}.log"
    if weekly_log.is_file():
        logs.append(weekly_log.name)
    patch = (ev.get(FIX_REVERTED) or {}).get("patch")
    if patch:
        logs.append(f"{patch} (the reverted edit)")
    return ", ".join(logs) or "none recorded"


def skip_blocks(j: Any) -> list[str]:
    """One block per failure whose triage says skip, by framework and split."""
    failing = {v.value for v in Verdict if v.listed_as_failure}
    lines: list[str] = []
    for c in sorted((c for c in j.cells.values() if c.verdict in failing), key=lambda c: c.key):
        key = f"{c.framework}/{c.split}"
        said = decision(c, j.fix_attempts.get(key), j.retries.get(key))
        if not said.startswith(SKIP):
            continue
        why = said.removeprefix(SKIP)
        reverted = c.evidence.get(FIX_REVERTED)
        if reverted and reverted.get("files"):
            why += f"; the edit was reverted (`{reverted['command']}`)"
        if reverted and reverted.get("left"):
            why += f"; not tracked by git, left in place: {', '.join(reverted['left'])}"
        prior = c.evidence.get(PRIOR_FAILURE) or c.evidence.get(PRIOR_OCCURRENCES) or "not looked up"
        lines += [f"### {c.framework} ({c.split})", f"- **Error**: {_error(c)}", f"- **Why skipped**: {why}",
                  f"- **Prior occurrences**: {prior}", f"- **Relevant logs**: {_logs(c, j)}", ""]
    return lines


def oom_blocks(j: Any) -> list[str]:
    """The OOM Cells section's body: its note, then one block per oom cell ("None." without)."""
    ooms = sorted((c for c in j.cells.values() if c.verdict == Verdict.OOM.value), key=lambda c: c.key)
    if not ooms:
        return ["None.", ""]
    lines = [OOM_NOTE, ""]
    for c in ooms:
        block = c.evidence.get(OOM_BLOCK) or {}
        lines += [f"### {c.framework} ({c.split})", f"- **Kernel line**: {c.reason}",
                  f"- **Run window**: {block.get('window') or 'unknown: the cell wrote no result'}",
                  f"- **Likely cause**: {block.get('cause') or 'the server needed more memory than was free'}",
                  f"- **Prior OOMs**: {block.get('prior') or 'not looked up'}",
                  f"- **Mitigation**: {block.get('mitigation') or MITIGATION}"]
        if c.evidence.get(TELEMETRY):
            lines.append(f"- **Telemetry**: {c.evidence[TELEMETRY]}")
        if c.result_path:
            lines.append(f"- **Result**: {c.result_path}")
        lines.append("")
    return lines


MITIGATION = "lower the concurrency, pick a smaller model, or run on a machine with more memory"
