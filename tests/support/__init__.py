"""Code the suite's own tests share that is not a fixture: the fault server (`faultserver`)."""
