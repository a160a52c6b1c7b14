"""The pytest-html review report: the cells, extras and environment table of its rows
(`columns`), the summary above them (`summary`) and how a row marks its intervals, its standing
against the previous run and settings unlike its split's (`marks`)."""
