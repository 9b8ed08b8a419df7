"""Verdicts: pure rules (decision + flags) apart from gathering the evidence.

``model`` holds the values (Verdict, Flag, ConditionResult, ShimEvidence and their enums);
``conditions`` judges each retirement condition, ``execution`` reads the recorded runs and
``rules`` decides — one function per numbered rule of ``docs/verdicts.md``, all pure; ``lanes``
gives each lane its step (placing each against the bug's window with :mod:`retire.history.place`).
``gather`` is the I/O: ``plan`` lists every distinct look-up as a typed job (``jobs``), gather
runs them concurrently (``mirrored`` opens local mirrors once) and assembles each shim's
evidence; ``windows`` completes each shim's window with its target's mirror, found as every
command finds it (:mod:`retire.mirrors.resolve`; commit runs ordered, a fix on a followed branch,
ancestry of revision lanes' commits); ``options`` is how it
probes; ``served`` digests what a lane's indexes list, the
footing of a cached trial re-lock.
"""
