"""One cell end to end: start the servers, warm up, run each level, decide the verdict, write the result."""
