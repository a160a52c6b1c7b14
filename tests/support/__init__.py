"""Code the suite's own tests share that is not a fixture: the fault server (`faultserver`) and
what a real-server test accepts from a busy host (`busy`)."""
