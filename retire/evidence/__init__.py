"""Evidence: what runs and probes found, as values the verdicts read.

``validation`` (the validation manifest: one JSON Lines record per reproducer run, with its
loading, merging and quarantine of damaged lines), ``values`` (the typed, immutable evidence
values of the probes, or a ``ProbeFailure``; no I/O), ``floor`` (a proposed requirement floor),
``coremetadata`` (the URLs a distribution's core metadata names — where it says its code lives —
and an installed copy's, read), ``jsonlines`` (the one tolerant reader of every JSON Lines
evidence file: damaged lines skipped with one warning naming the file and the line) and
``culprits`` (``validation/culprits.jsonl``: the culprits recorded, read and appended). A bug's
window, read from the records, lives in :mod:`retire.history`.
"""
