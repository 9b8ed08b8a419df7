"""Evidence: what runs and probes found, as values the verdicts read.

``validation`` (the validation manifest: one JSON Lines record per reproducer run, with its
loading, merging and quarantine of damaged lines), ``values`` (the typed, immutable evidence
values of the probes, or a ``ProbeFailure``; no I/O), ``floor`` (a proposed requirement floor) and
``coremetadata`` (the URLs a distribution's core metadata names — where it says its code lives —
and an installed copy's, read). A bug's window, read from the records, lives in
:mod:`retire.history`.
"""
