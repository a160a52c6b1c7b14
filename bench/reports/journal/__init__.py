"""The run's journal: what happened to every cell, as a markdown page and its JSON twin.

`weekly_<YYYY-MM-DD>.journal.md` and `.journal.json` in `results/<model>/<machine>/` (`names`:
also the `journal_<date>` files of earlier runs), the state and its saving (`state`), the page in
the shape of SiliconBench's weekly journal (`render`), each failure's fix / retry / skip line
(`triage`) and telemetry reading (`telemetry`), and the skips and fixes of prior journals,
cellbench's and SiliconBench's (`prior`).
"""

from bench.reports.journal.names import (
    DIAGNOSED_SKIP,
    FIX_REVERTED,
    IMPORTED_COMPARISON,
    LAST_PASS,
    OOM_BLOCK,
    RETRIED,
    TELEMETRY,
)
from bench.reports.journal.render import render, write_index
from bench.reports.journal.state import JOURNAL_DAY_ENV, JOURNAL_VERSION, CellEntry, Journal

__all__ = ["DIAGNOSED_SKIP", "FIX_REVERTED", "IMPORTED_COMPARISON", "JOURNAL_DAY_ENV", "JOURNAL_VERSION", "LAST_PASS",
           "OOM_BLOCK", "RETRIED", "TELEMETRY", "CellEntry", "Journal", "render", "write_index"]
