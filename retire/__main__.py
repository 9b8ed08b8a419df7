"""``python -m retire`` and the ``patchlane`` command: SIGTERM is handled from the first line.

The console script points here rather than at :func:`retire.commands.main` because importing the
commands takes a good part of a second: a Ctrl-C or SIGTERM in that time is an interruption like
any other (one line, the error document on ``--json``, 130 / 143), never a traceback or a silent
-15.
"""

import os
import sys

from retire.core import interrupts


def main() -> int:
    # before the engine is imported: SIGTERM during start-up is an interruption too
    interrupts.install()
    try:
        code = _command()
    finally:
        # what was said stands: a signal while the interpreter exits must not replace the code
        interrupts.ignore()
    if code in (interrupts.INTERRUPTED, interrupts.TERMINATED):
        # Interrupted: the line and the document are out, the processes ended, every write was
        # atomic. The interpreter's own exit would turn an interrupt it saw during an import into
        # death by SIGINT (exit -2), and would wait for worker threads still blocked on the
        # network.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _command() -> int:
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
