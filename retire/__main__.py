import sys

from retire.commands import main

sys.exit(main())
