"""Locks: a lane → ``locks/<lane>/pylock.toml`` through uv, and what is made from locks.

``locking`` (lock a lane, ``lock_path``, is a lock current), ``uvinputs`` (what uv is given),
``cutoffs`` (freezes and cooldowns as absolute cutoffs), ``pins`` (revisions resolved in the
mirrors), ``integrity`` (content digest, versions the lane allows), ``failures`` (what uv's
failure means), ``lockdiff`` (lock diffs keyed by name and marker), ``overlay`` (a lock cut to
what a base image lacks), ``wheelhouse`` and ``buildreqs`` (wheelhouses for offline hosts),
``trial`` (would a lane resolve with its pins raised to a retirement floor, or what blocks it).
"""
