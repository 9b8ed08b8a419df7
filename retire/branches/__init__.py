"""Git branches for people to merge: auto-drop of retired shims, lock bumps.

``proposals`` makes a branch in a separate worktree, commits once and opens a pull request (there
is no merge path); ``autodrop`` turns a *retire* verdict into a branch that removes the shim and
raises the lanes' floors (``retirement`` builds its plans from verdicts); ``bump`` re-locks lanes
with upgrades and reports the shims' outcomes.
"""
