"""Probes of upstream: each returns typed evidence (``retire.evidence``) or a ``ProbeFailure``.

- ``index`` (with ``pages``): releases of a distribution (PEP 691 JSON or PEP 503 HTML simple
  API); ``notes``: release notes where the index gives them; ``coremeta``: the URLs a release's
  core metadata names, as the index serves it beside a wheel (where its code lives);
- ``codehost``: issue and pull request state (GitHub REST, batched through ``graphql`` with a
  token); ``links`` (web URLs → ``LinkRef``, authentication) and ``linkstate`` (an answer,
  checked) are what both ways share;
- ``records``: recorded reproducer runs without the shim (validation manifest);
- ``http``: the shared HTTP layer (retries, rate limits, deadline, size cap, same-host
  redirects), with ``client``, ``fetched``, ``cache`` (ETag), ``watchdog`` and ``redaction``.
"""
