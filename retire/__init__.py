"""patchlane's engine: lanes, locks, lane runs, probes, verdicts and reports.

Kept import-light: submodules are imported where they are used.
"""
