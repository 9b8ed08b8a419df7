"""Upstream packs: one submission prepared from a shim, for a human to file.

``model`` (pure: what ``shims/<id>/pack.toml`` says and the body rendered from it), ``render``
(pure: the body from the manifest and one template per category), ``checks`` (pure: the
readiness rules, each returning blockers), ``waves`` (pure: the filing history and the next
wave), ``store`` (on disk: load, check, approve, record filings; the weekly report's filing
queue) and ``export`` (an approved pack as files to post; nothing is filed from here).
"""
