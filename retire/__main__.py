import sys

from retire.core import interrupts

# before the engine is imported: SIGTERM during start-up is an interruption too, never a silent
# death
interrupts.install()
try:
    from retire.commands import main
# Ctrl-C or SIGTERM while the engine was being imported: the line (and --json's document) the
# commands print
except KeyboardInterrupt as exc:
    with interrupts.quiet():
        from retire.commands.base import ExitCode, configure, print_error

        configure(json="--json" in sys.argv[1:])
        code = ExitCode(interrupts.exit_code(exc))
        sys.exit(print_error(code, "interrupted", line="patchlane: interrupted"))

sys.exit(main())
