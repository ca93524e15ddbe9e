"""Measuring a job: the probe calls, the synchronised round, the measured profile, its key,
cache and re-check, the deployment probe, and the calibration behind ``faasml profile``."""
