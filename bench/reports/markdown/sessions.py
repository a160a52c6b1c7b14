"""REPORT.md's *Sessions* section: a session level's turns by index, per framework and level
(bench.core.figures.sessions), where any result of the split ran --sessions."""

from __future__ import annotations

from bench.core.figures import block_of
from bench.core.level_run import level_label
from bench.reports.comparison import Comparison
from bench.reports.markdown.text import num, table


def sessions_section(comparison: Comparison) -> list[str]:
    rows = []
    for fw in comparison["frameworks"]:
        for level in comparison["results"][fw]["levels"]:
            block = block_of(level, "sessions")
            for t in block.get("by_turn", ()):
                cached = "—" if t["cached_share"] is None else num(t["cached_share"], 1, 100, "%")
                rows.append([fw, level_label(level), str(t["turn"] + 1), f"{t['ok']}/{t['sent']}",
                             num(t["ttft_p50_ms"], 1), num(t["e2el_p50_ms"], 1), num(t["prompt_tokens_mean"], 0),
                             cached])
    if not rows:
        return []
    header = ["Framework", "Level", "Turn", "Answered", "TTFT p50 (ms)", "E2EL p50 (ms)", "Prompt tokens (mean)",
              "Of them from the prefix cache"]
    return ["## Sessions", "", "Each turn carried the conversation so far with the server's own answers; a server "
            "that reuses the conversation's prefix keeps TTFT flat as the prompt grows (docs/metrics.md, Sessions). "
            "The prefix-cache share is what the server told each request; — where it told nothing.", "",
            *table(header, rows), ""]
