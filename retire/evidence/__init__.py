"""Evidence: what runs and probes found, as values the verdicts read.

``validation`` (the validation manifest: one JSON Lines record per reproducer run, with its
loading, merging and quarantine of damaged lines), ``values`` (the typed, immutable evidence
values of the probes, or a ``ProbeFailure``; no I/O) and ``floor`` (a proposed requirement floor).
A bug's window, read from the records, lives in :mod:`retire.history`.
"""
