"""The pytest layer: cellbench's pytest plugins, one concern per module.

- options: registers every option and builds `Settings` on the stash; `results_root`
- opts: each option declared once (flag, parser, default, check, help, field); the builder,
  the rootdir re-decision and docs/options.md's generator
- budget: a cell's budget against pytest-timeout's timeout
- cells: one test per (framework, split), with its markers
- verdicts: a cell's verdict as a pytest outcome (`enforce`); the fixtures that call it are in fixtures/
- signals: SIGTERM and SIGHUP interrupt like Ctrl-C; an interrupted cell keeps its verdict
- hooks: the hookspec `pytest_cellbench_cell_finished` and its `CellRecord` (not a plugin)
- transport: a cell's record from the process that ran it to the controller, where the hook fires
- recorder: terminal categories, verdict counts, journals, the splits' reports
- html: the pytest-html columns, extras and environment table
- eval: the eval rows (`pytest -m eval`) and their table edits
- eval_rows: the eval plugin's parts that are not hooks: what a process keeps for the rows
  (`session`) and the controller's `EvalRecorder` (`recorder`); not plugins

Size: a module per plugin (each a pytest11 entry point named after it), and the hooks they share.
"""
