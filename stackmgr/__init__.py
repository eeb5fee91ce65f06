"""stackmgr: keep dirty git trees safe and reproducible."""

__version__ = "0.1.0"
