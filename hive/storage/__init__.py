"""The storage layer: the one owner of what hive keeps on disk. Only this package imports lmdb.

- schema.py: the databases, key layouts, URL states and the meta state (``MetaState``);
- store.py: a store held open for writing by its process (group commit), file checks;
- modes.py: the read-only (verify, status) and durable (resize) opens;
- datadir.py: the data directory's layout and ``hive.json`` (``DataDir``);
- verify.py: the consistency checks of stopped stores (``hive verify``).
"""
