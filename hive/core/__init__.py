"""The pure core: URLs, the hash ring, politeness, the URL record and its wire
format, and the two-stage frontier. It takes ``now`` and opens no socket, thread
or HTTP connection; the frontier persists through :mod:`hive.storage`."""
