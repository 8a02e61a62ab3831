"""``python -m statectl``: the statectl command."""

from statectl.cli.entry import run

run()
