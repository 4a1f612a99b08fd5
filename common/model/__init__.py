"""The run's model of the table: the spec, taxonomies, the run-time QID trees, TOML checks."""
