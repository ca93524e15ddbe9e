"""Conformance suites every platform and store implementation must pass, and their helpers."""
