"""``python -m simrun.cli``."""

from simrun.cli import main

main()
