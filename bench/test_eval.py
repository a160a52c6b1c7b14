"""The eval rows: one test per row of `models/<model>/eval.yaml`, e.g. `test_eval_row[arith-llamacpp-c4]`.

`pytest -m eval` runs them all; `-k <row id>` one. A passing row rewrites its reference-table row
in `benchmarks/eval/benchmark_*.py` as soon as it finishes (not under `--smoke` or
`--no-table-update`), and the run ends in one local commit of the edited files (not under
`--no-commit`; never pushed).
"""


def test_eval_row(eval_row, run_eval_row):
    run_eval_row(eval_row)
