"""hive: a polite, prioritizing, persistent web crawler (Mercator's frontier as a hive of processes)."""

__version__ = "0.1.0"
