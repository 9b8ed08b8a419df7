import sys

from retire.cli import main

sys.exit(main())
