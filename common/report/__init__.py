"""The privacy officer's report: one self-contained HTML page per release (``fedanon report``
and ``--html`` on the commands that publish a release)."""
