"""Evidence: what runs and probes found, as values the verdicts read.

``validation`` (the validation manifest: one JSON Lines record per reproducer run, with its
loading, merging and quarantine of damaged lines), ``values`` (the typed, immutable evidence
values of the probes, or a ``ProbeFailure``; no I/O), ``window`` (a shim's window on its target's
releases from every recorded run, and ``Place``: where a release stands against it),
``branchfix`` (a fix on a followed branch, as recorded commit runs pin it), ``coremetadata``
(the URLs a distribution's core metadata names — where it says its code lives — and an installed
copy's, read), ``jsonlines`` (the one tolerant reader of every JSON Lines evidence file: damaged
lines skipped with one warning naming the file and the line) and ``culprits``
(``validation/culprits.jsonl``: the culprits recorded, read and appended).
"""
