"""The two-stage URL frontier (Mercator) of one worker, persisted in its store: the
façade ``frontier.Frontier`` over its parts — the seen set (``seen``), the front
queues and their biased chooser (``front``), the back queues (``back``), the heap of
hosts by next-allowed time (``heap``), the host records (``hosts``), the prioritizer
(``priority``), the refusals tally (``refusals``) — and the checks of what it stores
(``verify``)."""
