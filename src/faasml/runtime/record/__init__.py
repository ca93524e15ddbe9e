"""The run record, typed (``records``), its JSON in and out (``codec``, ``fields``), how a run
writes it (``writer``) and the run directory and its lock that hold it."""
