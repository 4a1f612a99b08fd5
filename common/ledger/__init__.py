"""The hospital's privacy ledger: what all runs together reveal stays bounded.

An append-only, hash-chained SQLite file per party daemon (:mod:`.store`, :mod:`.chain`)
records every Prepare -- accepted or refused -- before any statistic leaves, with who asked,
for what, over which data (:mod:`.fingerprint`), and how the run ended.  The budgets of
``[policy]`` (:mod:`.budgets`) bound the total epsilon and the number of distinct releases
per table and the runs per leader and day; refused calls lead to lockouts (:mod:`.access`).
:mod:`.daemon` is what the party daemon calls; :mod:`.show` what the privacy officer reads.
"""
