"""Platform implementations, one module each; looked up through ``faasml.runtime.PLATFORMS``."""
