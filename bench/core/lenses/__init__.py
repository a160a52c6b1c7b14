"""The lenses beside speed, each a comparison of its own: the energy a level took per output token
(`energy`) and whether a stack answers as the reference stack does (`fidelity`). The memory lens
is a level figure (bench.core.figures.memory)."""
