"""cellbench's options, each declared once (bench/plugins/options.py registers and reads them).

- spec: `Option` (flag, parser, default, check, help, the field it fills) and `option()`, an
  EvalSettings field's declaration
- settings: the cell options (`OPTIONS`) and `Settings`, the frozen records they are parsed into
- eval_settings: `EvalSettings`, the eval rows' options (`Settings.eval`)
- build: the one place the command line is read: checks, parses and resolves it into a `Settings`
- rootdir: pytest's rootdir and ini file, decided again once the options are known
- reference: docs/options.md, written from the declarations
"""
