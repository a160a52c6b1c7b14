"""Small shared helpers every layer may use: where files live, atomic writes, the clock, git."""
