"""A bug's history: the one home of its window on the target's releases and commits.

``edge`` (the two edges of a window: which kind, how much is known, the releases on each side and,
continued into the commits between two release tags, the commit and its pull request when
pinned; where an item stands against a window), ``window`` (the one value every reader takes: both
edges, the ordered history, a fix on a followed branch, the disagreements of the runs, where it
came from, and how it is said: a line, Markdown, JSON), ``reading`` (the one reading of validation
records into a window, pure: which run decides when runs disagree, and a flag for every
disagreement), ``place`` (the one placer of lanes: release lanes by version, revision lanes by
ancestry answers gathered elsewhere) and ``mirrored`` (I/O: what a local mirror says for them —
the commits between two tags, the first release containing a fix, ancestry of locked commits, the
lanes' locked targets).

``retire.bisect`` is the search that extends a history; verdicts, the report, packs, branches and
``patchlane bisect --json`` read the same value. No export map: import each name from its module.
"""
