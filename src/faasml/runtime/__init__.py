"""Running jobs for real, one folder per concept, bottom to top: ``platforms/`` (the
``Platform`` contract and its implementations), ``function/`` (what runs inside a function:
worker, probe, checkpoint, heartbeat), ``coordinator/`` (trials as groups of invocations,
the budget guard and the meter), ``profile/`` (measuring a job: the one pipeline behind
``faasml profile`` and a run's first step), ``record/`` (the typed run record, its JSON and
the run directory holding it) and ``runs/`` (tuning, training and workflow runs, resume)."""
