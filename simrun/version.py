"""simrun's version, in a module of its own: run.json records it without importing the
package's __init__ (which imports simrun.api, which writes run.json)."""

__version__ = "0.1.0"
