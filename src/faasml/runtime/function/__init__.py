"""What runs inside a function: the worker that trains a segment, its task and report, the
job probe, checkpoints, the heartbeat and injected faults."""
