"""Probes of upstream: each returns typed evidence (``retire.evidence``) or a ``ProbeFailure``.

- ``index``: releases of a distribution (PEP 691 JSON simple API);
- ``codehost``: issue and pull request state (GitHub REST API);
- ``gitrepo``: whether a fix commit is in a release tag of a local mirror;
- ``records``: recorded reproducer runs without the shim (validation manifest);
- ``http``: the shared HTTP layer (retries, rate limits, ETag cache).
"""
