import sys

from git_obversa.cli import main

sys.exit(main())
