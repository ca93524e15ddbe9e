"""The `faasml` command line."""
