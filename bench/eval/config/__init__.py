"""An eval config: its types and fields (`schema`), the checked reading of its YAML (`loader`,
`fields`), and the `--benchmarks` names that select its rows (`benchmarks`)."""
