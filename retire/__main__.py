"""``python -m retire`` and the ``patchlane`` command: SIGTERM is handled from the first line.

The console script points here rather than at :func:`retire.commands.main` because importing the
commands takes a good part of a second: a Ctrl-C or SIGTERM in that time is an interruption like
any other (one line, the error document on ``--json``, 130 / 143), never a traceback or a silent
-15.
"""

import sys

from retire.core import interrupts


def main() -> int:
    # before the engine is imported: SIGTERM during start-up is an interruption too
    interrupts.install()
    try:
        from retire.commands import main as run
    # Ctrl-C or SIGTERM while the engine was being imported: the line (and --json's document)
    # the commands print
    except KeyboardInterrupt as exc:
        with interrupts.quiet():
            from retire.commands.base import ExitCode, configure, print_error

            configure(json="--json" in sys.argv[1:])
            code = ExitCode(interrupts.exit_code(exc))
            return print_error(code, "interrupted", line="patchlane: interrupted")
    return run()


if __name__ == "__main__":
    sys.exit(main())
