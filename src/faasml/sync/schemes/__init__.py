"""Synchronisation schemes over any Store, chosen by name (CE-scaling eq. 3; SMLT Fig. 5)."""

from __future__ import annotations

from faasml.registry import Registry
from faasml.sync.schemes._base import SyncScheme

SCHEME_CLASSES: Registry[type[SyncScheme]] = Registry("synchronisation scheme")
"""'allreduce', 'scatter-reduce', 'param-server' -> SyncScheme class."""
SCHEME_CLASSES.register("allreduce", "faasml.sync.schemes.allreduce:AllReduce")
SCHEME_CLASSES.register("scatter-reduce", "faasml.sync.schemes.scatter_reduce:ScatterReduce")
SCHEME_CLASSES.register("param-server", "faasml.sync.schemes.param_server:ParamServer")

__all__ = ["SCHEME_CLASSES", "SyncScheme"]
