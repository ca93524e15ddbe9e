"""Parameter-server synchronisation (CE-scaling Fig. 5, VM-PS case of eq. 3).

Each worker sends its gradient to faasml's parameter-server process and receives the mean the
server computed: two model transfers per worker per round (the paper counts 2n − 2 by leaving
out the worker co-located with the server; here every worker is remote, so 2n).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from faasml.exceptions import ConfigError
from faasml.sync.param_server import ParameterServerStore
from faasml.sync.schemes._base import RoundScheme
from faasml.sync.stores._base import Store
from faasml.sync.stores.throttled import ThrottledStore


class ParamServer(RoundScheme):
    """Workers push gradients to the parameter server and pull the mean it computes."""

    name = "param-server"

    def __init__(self, store: Store, n_workers: int, namespace: str, timeout_s: float = 60.0):
        # Through a function's link (ThrottledStore) the push and the pull each take M / b.
        self._link = store if isinstance(store, ThrottledStore) else None
        server = store.inner if isinstance(store, ThrottledStore) else store
        if not isinstance(server, ParameterServerStore):
            raise ConfigError(
                f"the param-server scheme needs a parameter-server store (ps://host:port), "
                f"got {store.url!r}; start one with faasml.sync.param_server.ParameterServer"
            )
        super().__init__(store, n_workers, namespace, timeout_s)
        self.server: ParameterServerStore = server

    def _reduce_round(
        self, worker_id: int, round_id: int, gradient: NDArray[np.float32]
    ) -> NDArray[np.float32]:
        key = self._round_prefix(round_id)
        if self._link is not None:
            self._link.transfer(gradient.nbytes)  # the push over the function's link
        mean = self.server.reduce_mean(key, worker_id, self.n_workers, gradient, self.timeout_s)
        if self._link is not None:
            self._link.transfer(mean.nbytes)  # the pull
        return mean
