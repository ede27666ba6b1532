"""flagbench: show me the numbers for a code-generation change."""

__version__ = "0.1.0"
