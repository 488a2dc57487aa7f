"""hive: a polite, prioritizing, persistent web crawler (Mercator's frontier, as a hive)."""

__version__ = "0.1.0"
