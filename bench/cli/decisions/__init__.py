"""Comparisons as decisions: `cellbench compare OLD NEW` (compare) and a machine's noise floor,
`cellbench noise FRAMEWORK` (noise). A package of its own so bench/cli keeps to ten modules."""
