"""The benchmark cells: one test per (framework, split), e.g. `test_cell[llamacpp-chat]`.

Select with markers (`-m chat`, `-m "llamacpp and agent"`) or `-k`. Each cell starts its own
servers, measures every concurrency level, writes its result file and asserts its verdict.
"""

from bench.run.cell import run_cell


def test_cell(cell_config, server_launcher, enforce_verdict):
    enforce_verdict(run_cell(cell_config, server_launcher))
