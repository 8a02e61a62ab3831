"""``python -m statectl``: the statectl command."""

from statectl.cli.main import run

run()
