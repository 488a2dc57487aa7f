"""The storage layer: the one owner of what hive keeps on disk (LMDB stores and
their schema, and the checks of them). Only this package imports lmdb."""
