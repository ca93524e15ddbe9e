"""Platform implementations, one module each; looked up through ``contract.PLATFORMS``."""
