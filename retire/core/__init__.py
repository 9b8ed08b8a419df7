"""The engine's ground floor: what every part shares, importing nothing of the engine above it.

``errors`` (the one input-error type and the rest), ``atomic`` (all-or-nothing writes), ``git``
(the one git runner), ``uv`` (the pinned uv binary, the one way to run it, the host's indexes),
``project`` (:class:`~retire.core.project.Project`: where everything lives, and ``contained()``,
the one check that a path stays inside the project), ``childenv`` (the allow-list of what child
processes inherit), ``uvauth`` (uv's index credentials, handed over outside its environment),
``interrupts`` (SIGTERM stops a command as Ctrl-C does), ``secrets`` (the one scrubber every
outgoing string passes), ``tooltext`` (what a tool says, relayed without its control sequences)
and ``mdsafe`` (untrusted text inside the Markdown the engine writes:
fenced, or one line of inert prose). The one ISO 8601 time parser is the runtime's,
``shims.times``.
"""
