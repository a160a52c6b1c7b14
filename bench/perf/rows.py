"""The rows `cellbench perf compare` prints: one `ClientRow` a client, as a Markdown table with its
legend."""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.perf.client_figures import Spread, TimingError

LEGEND = """\
CPU per chunk: (CPU of {n3} requests - CPU of {n}) / (their difference in chunks), {streams} streams of {tokens}
chunks from the unpaced server; chunks/s, requests/s: the {n3}-request run's, the client on one core, its CPU
share over the extra work and the server's (either near 1: that one was the limit). Paced runs: {rounds}
requests per stream, first token {first:g} ms after the request (the opening round's streams staggered over a
stream's length), then one chunk per {interval:g} ms; server wrote: its chunks/s once every stream ran.
TTFT error: |the client's TTFT - the server's own| after the opening round, the server's wait to read a request
included (bias: the median signed error; opening: the opening round's p50, every stream sent at once); ITL
error: |the client's gap - the server's|."""


@dataclass
class ClientRow:
    """One client's line of the perf comparison: its spreads over the runs, or why it did not run."""

    client: str
    version: str
    cpu_us_per_chunk: Spread | None = None
    chunks_per_s: Spread | None = None
    requests_per_s: Spread | None = None  # of the same unpaced 3N runs
    client_cpu_share: Spread | None = None  # over the unpaced runs' extra work: below ~0.9, not client-bound
    server_cpu_share: Spread | None = None  # of the unpaced 3N runs: near 1.0, the server was the bound
    timing: list[TimingError] = field(default_factory=list)
    server_late_p99_us: dict[str, float] = field(default_factory=dict)  # per rate, the worst run's
    requests: int = 0
    failed: int = 0
    missing: str | None = None  # why this client did not run


def _spread(s: Spread | None, fmt: str) -> str:
    if s is None:
        return "-"
    return format(s.median, fmt) if s.n == 1 else f"{s.median:{fmt}} ({s.low:{fmt}}-{s.high:{fmt}})"


def _pair(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None else f"{a:.3f} / {b:.3f}"


def table(rows: list[ClientRow], rates: tuple[int, ...]) -> str:
    """The rows as a Markdown table (medians, with the range over repeats when there are several)."""
    head = ["client", "CPU per chunk (us)", "chunks/s on one core", "requests/s", "CPU share: client / server"]
    for rate in rates:
        head += [f"server wrote (chunks/s) @{rate:,}/s", f"TTFT error p50 / p99 (ms) @{rate:,}/s",
                 f"ITL error p50 / p99 (ms) @{rate:,}/s"]
    head.append("failed")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if r.missing:
            lines.append(f"| {r.client} | " + r.missing + " |" + " |" * (len(head) - 2))
            continue
        cells = [f"{r.client} {r.version}", _spread(r.cpu_us_per_chunk, ".1f"), _spread(r.chunks_per_s, ",.0f"),
                 _spread(r.requests_per_s, ",.0f"),
                 f"{_spread(r.client_cpu_share, '.2f')} / {_spread(r.server_cpu_share, '.2f')}"]
        for t in r.timing:
            bias = "" if t.ttft_bias_ms is None else f", bias {t.ttft_bias_ms:+.3f}"
            opening = "" if t.ttft_opening_p50_ms is None else f", opening {t.ttft_opening_p50_ms:.1f}"
            wrote = "-" if t.written_per_s is None else f"{t.written_per_s:,.0f}"
            cells += [wrote, _pair(t.ttft_p50_ms, t.ttft_p99_ms) + bias + opening, _pair(t.itl_p50_ms, t.itl_p99_ms)]
        cells.append(f"{r.failed} of {r.requests}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
