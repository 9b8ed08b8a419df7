"""Lanes: pinned environment recipes, read from ``lanes/*.toml`` into immutable values.

``model`` (:class:`~retire.lanes.model.Lane` and its parts; no I/O), ``lanefile`` (lane and
matrix files → lanes, every bad input one line; ``project_lanes`` loads a project's), ``matrix``
(axes × values → cells), ``lanedit`` (automated lane edits that keep comments and layout) and
``revisions`` (lanes pinned to upstream revisions in local git mirrors).
"""
