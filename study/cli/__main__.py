"""`python -m study.cli`: the `study` command, where its console script is not on the PATH."""

import sys

from study.cli import main

sys.exit(main())
