"""The null server the perf tools measure a client against: the zero-work SSE server (`server`) and
its precise pacer and write log (`pacer`)."""
