"""Top-down specialization: shared state, partitions (TIPS), statistics, decisions, and the
round loop."""
