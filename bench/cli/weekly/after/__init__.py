"""What follows a weekly run's sessions: the one retry of cells whose failures were transient
(`retry`), the fix attempts that did not make their cell pass reverted (`revert`), and the
results and edits committed on the `weekly/<date>` branch (`branch`)."""
