"""Command-line usage errors (an option out of its range, an unknown option, a missing
value) in simrun's own style: one paragraph on stderr, exit status 2, instead of Typer's
three blocks (Usage / Try / Error)."""

from __future__ import annotations

import re
import sys
from typing import Any

from typer import Abort

from simrun.scene.errors import shorten

try:  # Typer 0.29 and later carry their own copy of click
    from typer._click.exceptions import ClickException, UsageError
except ImportError:  # pragma: no cover - older Typer uses click itself
    from click.exceptions import ClickException, UsageError

EXIT_BAD_INPUT, EXIT_INTERRUPTED = 2, 130
_PLAIN = ((r"^Input should be greater than or equal to", "must be at least"),
          (r"^Input should be less than or equal to", "must be at most"),
          (r"^Input should be a valid integer.*", "must be a whole number"),
          (r"^Input should be a valid number.*", "must be a number"),
          (r"^Input should be", "must be"))  # Typer's (pydantic's) wording, made ours


def _command(ctx: Any) -> str:
    """``simrun batch`` for the context of the batch command (however Python was started)."""
    names = []
    while ctx is not None and ctx.parent is not None:
        names.append(ctx.info_name)
        ctx = ctx.parent
    return " ".join(["simrun", *reversed(names)])


def _given(option: str, argv: list[str]) -> str | None:
    """The value the command line gave ``option`` (``--retries -1`` or ``--retries=-1``)."""
    for i, arg in enumerate(argv):
        if arg == option and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(option + "="):
            return arg[len(option) + 1:]
    return None


def usage_message(exc: Any, argv: list[str]) -> str:
    """One paragraph: the option and the value given, what is wrong, where help is."""
    text = exc.format_message()
    param = getattr(exc, "param", None)
    opts = [o for o in getattr(param, "opts", []) if o.startswith("-")]
    if opts and text.startswith("Invalid value for"):
        given = next((v for v in (_given(o, argv) for o in opts) if v is not None), None)
        reason = text.split(": ", 1)[-1]
        for pattern, plain in _PLAIN:
            reason = re.sub(pattern, plain, reason)
        shown = f"{opts[0]} {shorten(given)}" if given is not None else opts[0]
        text = f"{shown}: {reason}"
    text = shorten(text.strip().rstrip("."), 300)
    help_for = _command(getattr(exc, "ctx", None))
    return f"error: {text}. See '{help_for} --help'."


def run_app(app: Any, argv: list[str] | None = None) -> int:
    """Run the Typer ``app`` and return its exit status, usage errors reported our way."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        code = app(argv, standalone_mode=False)
    except UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # a bare command: its help, exit 2
            exc.show()
            return EXIT_BAD_INPUT
        sys.stderr.write(usage_message(exc, argv) + "\n")
        return EXIT_BAD_INPUT
    except ClickException as exc:
        sys.stderr.write(f"error: {shorten(exc.format_message(), 300)}\n")
        return exc.exit_code
    except Abort:
        sys.stderr.write("interrupted\n")
        return EXIT_INTERRUPTED
    return code if isinstance(code, int) else 0
