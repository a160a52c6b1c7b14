"""`run-state.json`: what happened to every row of an eval run, rewritten after every row.

A killed run still leaves the state of every finished row, and `--retry-failed-from <run dir>`
reads it back to rerun only the rows whose table edit did not land. The summary (replaced,
appended, failed runs, failed edits) is stored in the file and printed from it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.base.clock import now_iso
from bench.core.result.files import write_json_atomic

STATE_VERSION = 1
STATE_FILE = "run-state.json"
DONE_ACTIONS = ("replaced", "appended")


class RunState:
    def __init__(self, run_dir: Path, header: dict[str, Any]):
        self.path = run_dir / STATE_FILE
        self.header = {"state_version": STATE_VERSION, "started_at": now_iso(), **header}
        self.rows: dict[str, dict] = {}

    def record_row(self, row: dict) -> None:
        self.rows[row["id"]] = {**row, "edit": row.get("edit", {"status": "pending"})}
        self.write()

    def record_edit(self, row_id: str, edit: dict) -> None:
        self.rows[row_id]["edit"] = edit

    def summary(self) -> dict:
        rows = list(self.rows.values())
        ran = [r for r in rows if r["status"] in ("ok", "fail")]
        edits = [r["edit"] for r in rows]
        return {
            "rows": len(rows),
            "ran_ok": sum(r["status"] == "ok" for r in rows),
            "ran": len(ran),
            "skipped_rows": [{"id": r["id"], "reason": r["reason"]} for r in rows if r["status"] == "skipped"],
            "replaced": sum(e.get("action") == "replaced" for e in edits),
            "appended": sum(e.get("action") == "appended" for e in edits),
            "failed_runs": [{"id": r["id"], "reason": r["reason"], "excerpt": _last_lines(r.get("fail_excerpt", ""))}
                            for r in rows if r["status"] == "fail"],
            "failed_edits": [{"id": r["id"], "reason": r["edit"].get("reason", "")}
                             for r in rows if r["edit"].get("status") == "fail"],
            "skipped_edits": sum(r["edit"].get("status") == "skipped" for r in rows),
            # Edits made, with something the user must know (an n=3 mean row overwritten by one round).
            "edit_warnings": [{"id": r["id"], "warning": r["edit"]["warning"]}
                              for r in rows if r["edit"].get("warning")],
        }

    def write(self, finished: bool = False) -> None:
        data = {**self.header, "rows": list(self.rows.values()), "summary": self.summary()}
        if finished:
            data["finished_at"] = now_iso()
        write_json_atomic(self.path, data)

    def summary_lines(self) -> list[str]:
        s = self.summary()
        skipped = f" ({len(s['skipped_rows'])} skipped)" if s["skipped_rows"] else ""
        lines = [f"ran ok: {s['ran_ok']}/{s['ran']}" + skipped,
                 f"edits replaced: {s['replaced']}", f"edits appended: {s['appended']}"]
        if s["skipped_edits"]:
            lines.append(f"edits skipped: {s['skipped_edits']}")
        for failed in s["failed_runs"]:
            lines.append(f"FAILED RUN {failed['id']}: {failed['reason']}")
            lines += [f"    {line}" for line in failed["excerpt"].splitlines()]
        for failed in s["failed_edits"]:
            lines.append(f"FAILED EDIT {failed['id']}: {failed['reason']}")
        for warned in s.get("edit_warnings", []):
            lines.append(f"WARNING {warned['id']}: {warned['warning']}")
        lines.append(f"run state: {self.path}")
        return lines


def _last_lines(text: str, n: int = 3) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def refreshed_rows(run_dir_or_file: Path) -> set[str]:
    """The ids of rows whose run succeeded and whose table edit landed in an earlier run."""
    path = run_dir_or_file / STATE_FILE if run_dir_or_file.is_dir() else run_dir_or_file
    try:
        data = json.loads(path.read_text())
        rows = data["rows"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"--retry-failed-from {run_dir_or_file}: cannot read {path}: {exc}") from None
    return {row["id"] for row in rows
            if row.get("status") == "ok" and row.get("edit", {}).get("status") == "ok"
            and row["edit"].get("action") in DONE_ACTIONS}
