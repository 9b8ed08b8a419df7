import sys

from retire.commands.cli import main

sys.exit(main())
