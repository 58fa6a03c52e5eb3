"""`python -m study.cli`: the `study` command, where its console script is not on the PATH."""

from study.cli import run

run()
