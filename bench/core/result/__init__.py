"""The result file and its readers: the document's types (`model`), writing and validating one file
(`files`), a folder of them read back with the newest of each cell (`store`), and how a result
converted from another benchmark's file is told apart from a measured one (`imported`)."""
