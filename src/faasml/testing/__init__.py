"""Conformance suites every implementation of a contract must pass (run by pytest)."""
