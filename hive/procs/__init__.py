"""The hive's processes and their planes: the supervisor (its children, the batch end, the
stats it merges from the workers' reports), the host-splitter and the workers, the control
plane, endpoints and CURVE keys, the outbox, resize and the process lifecycle."""
