"""The eval plugin's parts that are not hooks (bench/plugins/eval.py holds those).

- session: what one pytest process keeps for the eval rows (the loaded config, the run's folder,
  its Source) and what a row may do and runs with; the plugin, the recorder and the row fixture
  (fixtures/eval_rows.py) read it
- recorder: `EvalRecorder`, on the controller: each finished row's table edit and run-state, the
  summary and the commit
"""
