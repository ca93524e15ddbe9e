"""A job's packed function sent by reference: put once in the run's object store under its
sha256, its model options carrying the key in place of the packed string, fetched once per
function instance (a warm one keeps it unpacked).

Every invocation's payload holds the recipe, and a function whose closure holds its data packs
to tens of megabytes: more than a FaaS request may carry (AWS Lambda's limit is 6 MB), and
paid again by every invocation. Both kinds of training function (a loop and a ``train_fn``
returning ``TorchTrainable``) travel this way; the fetched bytes are checked against the
digest and signature before anything is unpickled, as an inline one is.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from faasml.loop import KEY_OPTION
from faasml.sync.stores import Store, open_store
from faasml.workloads.function_model import (
    TrainFn,
    TrainFunctionError,
    loaded_function,
    unpack_blob,
    unpack_function,
)

STORE_OPTION = "function_store"
"""The model option naming the object store that holds the packed function (its URL)."""


def function_key(sha256: str) -> str:
    """The key of the packed function of digest ``sha256`` in an object store."""
    return f"function/{sha256}.pickle"


def by_reference(options: Mapping[str, Any], store: Store, shipped: set[str]) -> dict[str, Any]:
    """``options`` with its packed ``function`` put in ``store`` (unless its digest is in
    ``shipped``, which then holds it) and the store's URL and key in its place; options that
    carry no packed function come back as they are."""
    packed = options.get("function")
    if not isinstance(packed, str) or "sha256" not in options:
        return dict(options)
    sha256 = str(options["sha256"])
    key = function_key(sha256)
    if sha256 not in shipped:
        store.put(key, base64.b64decode(packed.encode("ascii")))
        shipped.add(sha256)
    sent = {k: v for k, v in options.items() if k != "function"}
    sent.update({STORE_OPTION: store.url, KEY_OPTION: key})
    return sent


def shipped_function(options: Mapping[str, Any]) -> TrainFn:
    """The training function a job's model options carry, inline (``function``) or by
    reference: fetched from its store on this process's first call, checked against its sha256
    and signature, unpacked, and kept while the process lives."""
    sha256, signature = str(options.get("sha256", "")), str(options.get("signature", ""))
    loaded = loaded_function(sha256)
    if loaded is not None:
        return loaded
    packed = options.get("function")
    if isinstance(packed, str):
        return unpack_function(packed, sha256, signature)
    url, key = options.get(STORE_OPTION), options.get(KEY_OPTION)
    if not isinstance(url, str) or not isinstance(key, str):
        raise TrainFunctionError(
            "the job's model options carry no train_fn: neither 'function' (packed) nor "
            f"'{STORE_OPTION}' and '{KEY_OPTION}' (sent by reference)"
        )
    store = open_store(url)
    try:
        blob = store.get(key)
    finally:
        store.close()
    if blob is None:
        raise TrainFunctionError(f"the packed train_fn {key!r} is not in the object store {url}")
    return unpack_blob(blob, sha256, signature)


__all__ = ["KEY_OPTION", "STORE_OPTION", "by_reference", "function_key", "shipped_function"]
