"""Git branches for people to merge: retirement of shims lane by lane, lock bumps.

``proposals`` makes a branch in a separate worktree, commits once and opens a pull request (there
is no merge path); ``autodrop`` turns a *retire* or *retire-in-some* verdict into a branch
(``retirement`` builds its plans from verdicts, ``dropplan`` is the plan, ``lanemoves`` edits and
re-locks exactly the lanes the shim leaves, ``dropmessage`` writes the commit message and PR
body); ``bump`` re-locks lanes with upgrades and reports the shims' outcomes.
"""
