"""Other benchmarks' result files, converted into cellbench results (`cellbench import`).

A team that switches to cellbench keeps its history: the suspicious check, the journal and the
reports see last week's numbers, labelled `imported` with the original file, its sha256 and its
timestamp, and with every metric the other tool derived differently marked as not comparable.
`siliconbench` reads and converts SiliconBench's `concurrency_results` files; `methods` says how
SiliconBench derived each metric; `tree` places the results in the results tree, once each and
never over a measured result.
"""
