"""The hive's processes and their planes: the supervisor, the host-splitter and
the workers, the control plane, endpoints and CURVE keys, the outbox, resize and
the process lifecycle."""
