"""Lane runs: lane environments built from their locks, and reproducer runs in them.

``envs`` (a lane's venv from its lock with uv, full or overlaid on a GPU image's interpreter),
``envcheck`` (proof the env holds what the lock says), ``wheelcache`` (wheels built from a mirror at
a commit, kept and reused) and ``sharedclone`` (one working clone per commit runner, each candidate
checked out and built there), ``reproduce`` (one reproducer run as a subprocess → a validation
record), ``launcher`` (reproducers forked from one lane interpreter that imported the heavy stack
once), ``launcherpool`` (warm launchers, one per slot of candidates run side by side, kept across
rounds), ``cancelling`` (one candidate's run cancelled while it runs: what it waits on killed,
nothing recorded), ``reaper`` (every reproducer tree started, and how the whole of it is stopped),
``lanerun`` (build each lane, run its shims in both modes, judge; the lane × shim table), ``proof``
(which shims some lane proves: the unproven ones fail ``run --strict``), ``suite`` (lane-run results
as pytest tests), ``gpus`` (the host's GPUs, found or declared, and what a lane needs of them),
``packing`` (which lane gets which GPUs: a pure choice and host-wide leases) and, for ``run
--executor slurm``, ``slurmconfig`` (``[slurm]``), ``sbatch`` (a lane's job script), ``slurmjob`` (a
job's state from Slurm's commands) and ``slurm`` (submit, wait, collect).
"""
