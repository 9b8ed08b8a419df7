"""The weekly retirement report and the catalogue doc.

``model`` (the report as immutable values: each shim's manifest and verdict as they are, with what
the runs add), ``build`` (pure: those values from manifests, lanes, verdicts, validation records,
the previous report and the history), ``sections`` (the one list of sections, each written once
as Markdown), ``markdown`` (JSON, the Markdown issue body and the short text), ``html`` (the
self-contained page: the sections' Markdown rendered by ``mdhtml``, a few drawn its own way),
``words`` (how a condition or a piece of evidence reads), ``evidence`` (verdict evidence as the
report keeps it), ``history`` (earlier reports and the git history of the manifests), ``weekly``
(the I/O: ``patchlane report``), ``catalogue`` (``docs/catalogue.md``) and ``vocabulary`` (the
one table of glyphs, labels and colours every renderer takes its looks from).
"""
