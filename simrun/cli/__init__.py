"""The ``simrun`` command line (Typer): one thin module per command; ``main()`` is the entry.

``main`` imports the application itself, so that Ctrl-C while Python is still importing
(typer, rich, NumPy) also ends with status 130 and one line, not a traceback.
"""

from __future__ import annotations

import sys
from typing import Any

EXIT_INTERRUPTED = 130


def main() -> None:
    """Console-script entry point (``simrun``)."""
    try:
        # start-up: `import simrun.cli` loads no command; Ctrl-C while loading exits 130
        from simrun.cli.app import app
        from simrun.cli.usage import run_app

        code = run_app(app)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(code)


def __getattr__(name: str) -> Any:  # ``from simrun.cli import app`` still works
    if name == "app":
        from simrun.cli.app import app  # start-up: `import simrun.cli` loads no command

        return app
    raise AttributeError(name)
