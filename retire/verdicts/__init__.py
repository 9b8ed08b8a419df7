"""Verdicts: pure rules (decision + flags) apart from gathering the evidence.

``model`` holds the values (Verdict, Flag, ConditionResult, ShimEvidence and their enums);
``conditions`` judges each retirement condition, ``execution`` reads the recorded runs and
``rules`` decides — one function per numbered rule of ``docs/verdicts.md``, all pure; ``lanes``
gives each lane its step, ``windowplace`` places a lane against the bug's recorded window.
``gather`` is the I/O: ``plan`` lists every distinct look-up as a typed job (``jobs``), gather
runs them concurrently (``mirrored`` opens local mirrors once) and assembles each shim's
evidence; ``branchfix`` reads a fix on a followed branch from the mirrors; ``options`` is how it
probes; ``served`` digests what a lane's indexes list, the
footing of a cached trial re-lock.
"""
