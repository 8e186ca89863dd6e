"""simrun: differentiable physical simulation from the command line."""

__version__ = "0.1.0"
