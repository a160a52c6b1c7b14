"""How sure a figure is: a metric's statistics block (`statistics`: mean, min, max, stdev and
percentiles, and rates of arrivals), each percentile's distribution-free 95% interval and the spread of a median across
rounds (`intervals`), and whether a difference between two runs is real (`change`)."""
