"""The pure core: canonical URLs, the hash ring, politeness delays, the URL record,
its wire format and the lease that carries it to a fetch. It takes ``now`` and
imports no socket, thread, process, HTTP module or store."""
