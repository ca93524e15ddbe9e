"""Built-in workloads: shipped profiles for planning (and, later, models and data loaders)."""
