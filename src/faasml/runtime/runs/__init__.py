"""The runs: tuning (``tune``), training (``train``), workflows (``workflow``), what they share
(``base``, ``planning``, ``inputs``), resume (``session``, ``job_guard``) and run events."""
