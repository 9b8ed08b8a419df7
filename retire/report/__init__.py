"""The weekly retirement report and the catalogue doc.

``model`` (the report as immutable values), ``build`` (pure: those values from manifests, lanes,
verdicts, validation records, the previous report and the history), ``markdown`` (JSON, the
Markdown issue body and the short text), ``html`` (the self-contained page) with ``mdhtml`` (the
engine's own Markdown sections as HTML), ``evidence`` (verdict evidence as the report keeps it),
``history`` (earlier reports and the git history of the manifests), ``weekly`` (the I/O:
``patchlane report``), ``catalogue`` (``docs/catalogue.md``) and ``vocabulary`` (the one table of
glyphs, labels and colours every renderer takes its looks from).
"""
