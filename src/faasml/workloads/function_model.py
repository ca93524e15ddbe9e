"""Any PyTorch training function as a faasml model: ``train_fn(config, ctx) -> TorchTrainable``.

``faasml.Tuner(train_fn, param_space, budget=...)`` runs a user's function through the same
machinery as a job file. The function is pickled by value with cloudpickle (so one defined in
a script's ``__main__``, a notebook or inside another function works) and is kept in the
job's model options; runs send it to the workers by reference (``faasml.loop.shipping``).
There ``function_model`` (the job's model factory, named
``faasml.workloads.function_model:function_model``) calls it under ``torch.manual_seed(seed)``
with the trial's configuration and wraps the module it returns in a ``FunctionModel``: a
``TorchModel`` (parameters as the flat vector, persistent buffers such as BatchNorm statistics
as the buffer vector) that trains with the optimiser the function chose. Models are cached
per (function, configuration) while the worker is warm.

On the coordinator side the Tuner calls the function once, for the first configuration, to
take its data (``as_dataset``); the data must not depend on the configuration. Workers never
touch the data a function returns: they train on their partition of that one data set.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from faasml._imports import optional_import
from faasml._signing import sign, unsigned_reason
from faasml.exceptions import ConfigError, FaasmlError, WorkloadError
from faasml.workloads import context
from faasml.workloads._base import Model
from faasml.workloads._dataset import Dataset
from faasml.workloads.optim import create_optimizer
from faasml.workloads.torch_model import LossFn, TorchModel, is_torch_module

FACTORY = "faasml.workloads.function_model:function_model"
"""The model name a function job's ``model:`` carries."""

TrainFn = Callable[[dict[str, Any], "FunctionContext"], Any]


class TrainFunctionError(WorkloadError):
    """A training function broke a rule of the function API; the message names the rule."""


class TorchTrainable:
    """What ``train_fn(config, ctx)`` returns: the module, its data, loss and optimiser.

    - ``model``: any ``torch.nn.Module`` with float32 parameters (buffers included).
    - ``train`` / ``test``: ``(features, labels)`` arrays or tensors, a faasml ``Dataset``, a
      torch ``Dataset`` of ``(x, y)`` samples, a ``DataLoader`` over one, or a function
      returning one of these (called only where the data is taken: once, by the Tuner).
      Labels are class indices. Without ``test``, a share of ``train`` is held out.
    - ``loss(outputs, labels)``: a mean minibatch loss; default cross-entropy.
    - ``optimizer``: ``"sgd"`` or ``"adam"`` with its hyperparameters as keywords (``lr=...``).
    - ``num_classes``: default the largest label + 1.

    The batch size (a ``DataLoader``'s, or ``batch_size`` in ``param_space`` or ``settings``) is
    the global batch: each round's rows are split over the trial's functions, so the results do
    not depend on how many the plan gives it.
    """

    def __init__(
        self,
        *,
        model: Any,
        train: Any,
        test: Any = None,
        loss: LossFn | None = None,
        optimizer: str = "sgd",
        num_classes: int | None = None,
        **hyperparameters: Any,
    ) -> None:
        self.model = model
        self.train = train
        self.test = test
        self.loss = loss
        self.optimizer = optimizer
        self.num_classes = num_classes
        self.hyperparameters = hyperparameters

    def check(self) -> TorchTrainable:
        """Raise a TrainFunctionError naming the first rule the fields break."""
        if not is_torch_module(self.model):
            raise TrainFunctionError(
                f"train_fn returned TorchTrainable(model=<{type(self.model).__name__}>), "
                "but model must be a torch.nn.Module"
            )
        if self.loss is not None and not callable(self.loss):
            raise TrainFunctionError(
                f"train_fn returned TorchTrainable(loss=<{type(self.loss).__name__}>), but loss "
                "must be a function loss(outputs, labels) -> scalar tensor, or None"
            )
        if self.num_classes is not None and (
            isinstance(self.num_classes, bool)
            or not isinstance(self.num_classes, int)
            or self.num_classes < 2
        ):
            raise TrainFunctionError(
                f"train_fn returned TorchTrainable(num_classes={self.num_classes!r}), but "
                "num_classes must be an integer >= 2"
            )
        if not isinstance(self.optimizer, str):
            raise TrainFunctionError(
                f"train_fn returned TorchTrainable(optimizer=<{type(self.optimizer).__name__}>), "
                "but optimizer must be a name, 'sgd' or 'adam' (faasml's, which match "
                "torch.optim's step for step), with its hyperparameters as keywords"
            )
        try:
            create_optimizer(self.optimizer, 1, **self.hyperparameters)
        except ConfigError as err:
            raise TrainFunctionError(f"train_fn's TorchTrainable: {err}") from None
        return self


class FunctionContext:
    """The ``ctx`` a training function receives."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)

    def report(self, **metrics: float) -> None:
        """Record named metrics of the epoch being trained (``faasml.report``); call it from
        code that runs while faasml trains: the loss, the module's forward, a hook."""
        if not context.active():
            raise TrainFunctionError(
                "ctx.report() records metrics while faasml trains; call it from the loss, the "
                "module's forward or a hook, not in train_fn's body"
            )
        context.report(**metrics)


class FunctionModel(TorchModel):
    """The module a training function built, as a Model: its initial weights and buffers are
    the ones it was built with (under the job's seed); it trains with the function's optimiser."""

    def __init__(
        self,
        trainable: TorchTrainable,
        *,
        input_shape: tuple[int, ...],
        num_classes: int,
        name: str,
    ) -> None:
        module = trainable.model
        super().__init__(
            lambda: module,
            trainable.loss,
            input_shape=input_shape,
            num_classes=num_classes,
            name=name,
            module=module,
        )
        self.trainable = trainable
        self._initial = self._torch.nn.utils.parameters_to_vector(self._params).detach().numpy()
        self._initial = self._initial.astype(np.float32, copy=True)
        self._initial_buffers = self.buffers()

    def own_optimizer(self) -> tuple[str, dict[str, Any]]:
        return str(self.trainable.optimizer), dict(self.trainable.hyperparameters)


# ---------------------------------------------------------------------- shipping the function

_FUNCTIONS: dict[str, TrainFn] = {}
_MODELS: dict[str, FunctionModel] = {}


def pack_function(function: TrainFn) -> tuple[str, str]:
    """``(base64 of the cloudpickled function, its sha256)``. The function's own module is
    pickled by value, so it need not be importable where the workers run."""
    import cloudpickle

    if not callable(function):
        raise TrainFunctionError(
            f"train_fn is a {type(function).__name__}, but must be a function "
            "train_fn(config, ctx) returning faasml.TorchTrainable"
        )
    module = sys.modules.get(getattr(function, "__module__", None) or "")
    registered = False
    if module is not None and module.__name__ not in ("__main__", "builtins"):
        try:
            cloudpickle.register_pickle_by_value(module)
            registered = True
        except ValueError:  # not a module cloudpickle can ship by value
            pass
    try:
        blob = cloudpickle.dumps(function)
    except Exception as err:
        raise TrainFunctionError(
            f"train_fn cannot be pickled to ship it to the workers: {type(err).__name__}: {err}"
        ) from None
    finally:
        if registered and module is not None:
            cloudpickle.unregister_pickle_by_value(module)
    digest = hashlib.sha256(blob).hexdigest()
    _FUNCTIONS.setdefault(digest, function)
    return base64.b64encode(blob).decode("ascii"), digest


def function_structure(function: TrainFn, trainable: TorchTrainable) -> str:
    """A digest of what the function builds, the same in every process (its pickle is not: a
    closure's tensors pickle differently each time): its name, code and source, and the
    module, parameter shapes and loss it returned. The profile cache keys a function job by it
    (with the data's content, the configuration and the search space)."""
    import inspect

    digest = hashlib.sha256()
    name = f"{getattr(function, '__module__', '')}:{getattr(function, '__qualname__', '')}"
    digest.update(name.encode() + b"\0")
    code = getattr(function, "__code__", None)
    code = code or getattr(type(function).__call__, "__code__", None)
    if code is not None:
        _code_digest(code, digest)
    with contextlib.suppress(OSError, TypeError):  # no source kept (an interactive prompt)
        digest.update(inspect.getsource(function).encode())
    module = trainable.model
    shapes = [(n, tuple(t.shape), str(t.dtype)) for n, t in module.state_dict().items()]
    loss = trainable.loss
    digest.update(repr((repr(module), shapes, getattr(loss, "__qualname__", repr(loss)))).encode())
    return digest.hexdigest()


def _code_digest(code: Any, digest: Any) -> None:
    """A code object's bytecode, names and constants, nested functions' included (their repr
    holds an address)."""
    digest.update(code.co_code)
    digest.update(repr((code.co_name, code.co_names, code.co_varnames)).encode())
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            _code_digest(const, digest)
        elif isinstance(const, frozenset):  # its order follows the process's string hashing
            digest.update(repr(sorted(repr(c) for c in const)).encode())
        else:
            digest.update(repr(const).encode())


def sign_packed(packed: str) -> str:
    """The signature of a packed function under the user's key (``faasml._signing``): what
    lets this user's runs load it again, in workers and on resume."""
    return sign(base64.b64decode(packed.encode("ascii")))


def unpack_function(packed: str, sha256: str, signature: str = "") -> TrainFn:
    """The function ``pack_function`` packed (cached by its hash while the process lives).
    Unpickling runs code: a function this process did not pack is loaded only with the user's
    signature (``sign_packed``), else refused in one line."""
    if sha256 not in _FUNCTIONS:
        unpack_blob(base64.b64decode(packed.encode("ascii")), sha256, signature)
    return _FUNCTIONS[sha256]


def unpack_blob(blob: bytes, sha256: str, signature: str = "") -> TrainFn:
    """``unpack_function`` of the pickle's bytes (not base64): checked against ``sha256`` and
    ``signature`` before anything is unpickled."""
    if sha256 not in _FUNCTIONS:
        import cloudpickle

        if hashlib.sha256(blob).hexdigest() != sha256:
            raise TrainFunctionError("the packed train_fn does not match its sha256")
        reason = unsigned_reason(blob, signature)
        if reason is not None:
            raise TrainFunctionError(
                f"refusing to load the pickled train_fn this job holds: {reason}, and faasml "
                "unpickles only functions this user packed on this machine; run it again from "
                "your own code (faasml.Tuner(train_fn, ...))"
            )
        _FUNCTIONS[sha256] = cloudpickle.loads(blob)
    return _FUNCTIONS[sha256]


def loaded_function(sha256: str) -> TrainFn | None:
    """The function of digest ``sha256`` if this process packed or unpacked it, else None."""
    return _FUNCTIONS.get(sha256)


def call_train_fn(function: TrainFn, config: Mapping[str, Any], seed: int) -> TorchTrainable:
    """``function(config, ctx)`` under ``torch.manual_seed(seed)``, its result checked."""
    torch = optional_import("torch", "torch")

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        result = function(dict(config), FunctionContext(config))
    if not isinstance(result, TorchTrainable):
        raise TrainFunctionError(
            f"train_fn returned {type(result).__name__}, but must return "
            "faasml.TorchTrainable(model=..., train=..., optimizer=..., lr=...)"
        )
    return result.check()


def _key(sha256: str, config: Mapping[str, Any], seed: int, shape: Sequence[int], k: int) -> str:
    return json.dumps([sha256, dict(config), seed, list(shape), k], sort_keys=True, default=repr)


def function_model(
    sha256: str,
    config: Mapping[str, Any],
    seed: int,
    shape: Sequence[int],
    classes: int,
    function: str | None = None,
    label: str = "train_fn",
    signature: str = "",
    structure: str = "",
    function_store: str = "",
    function_key: str = "",
) -> Model:
    """The model factory of a function job: ``function`` (packed, signed with ``signature``)
    built for ``config``, for samples of ``shape`` and ``classes`` classes; ``label`` names
    the model in messages; ``structure`` (``function_structure``) keys its cached profile.
    A function sent by reference (``function_key`` in the object store ``function_store``;
    ``faasml.loop.shipping``) was fetched and unpacked by the worker before it calls this."""
    key = _key(sha256, config, seed, shape, classes)
    if key not in _MODELS:
        loaded = loaded_function(sha256)
        if loaded is None and function is None:
            raise TrainFunctionError(
                f"the train_fn of sha256 {sha256[:12]}... was sent by reference "
                f"({function_key!r} in {function_store}) and is not loaded in this process"
            )
        if loaded is None:
            loaded = unpack_function(str(function), sha256, signature)
        trainable = call_train_fn(loaded, config, seed)
        remember(sha256, config, seed, trainable, tuple(shape), classes, label)
    return _MODELS[key]


def remember(
    sha256: str,
    config: Mapping[str, Any],
    seed: int,
    trainable: TorchTrainable,
    input_shape: tuple[int, ...],
    num_classes: int,
    name: str,
) -> FunctionModel:
    """Wrap ``trainable`` and cache it for ``function_model`` (so the Tuner's first call to
    the function also serves the coordinator's model)."""
    if len(_MODELS) > 8:
        _MODELS.clear()
    model = FunctionModel(trainable, input_shape=input_shape, num_classes=num_classes, name=name)
    _MODELS[_key(sha256, config, seed, input_shape, num_classes)] = model
    return model


# ---------------------------------------------------------------------- data


def as_dataset(value: Any, where: str, num_classes: int | None = None) -> Dataset:
    """A training function's ``train`` or ``test`` as a Dataset (see ``TorchTrainable``)."""
    features, labels = _arrays(value, where)
    labels = np.asarray(labels)
    if labels.dtype.kind == "f" and not np.array_equal(labels, np.round(labels)):
        raise TrainFunctionError(
            f"TorchTrainable.{where} has labels that are not whole numbers; labels must be "
            "class indices (regression targets are not supported)"
        )
    try:
        return Dataset.from_arrays(features, labels, num_classes)
    except WorkloadError as err:
        raise TrainFunctionError(f"TorchTrainable.{where}: {err}") from None


def _arrays(value: Any, where: str) -> tuple[Any, Any]:
    torch = sys.modules.get("torch")
    is_torch_data = torch is not None and isinstance(
        value, torch.utils.data.Dataset | torch.utils.data.DataLoader
    )
    if callable(value) and not is_torch_data and not isinstance(value, Dataset):
        value = value()
    if isinstance(value, Dataset):
        return value.features, value.labels
    if isinstance(value, tuple | list) and len(value) == 2:
        return _numpy(value[0]), _numpy(value[1])
    if torch is not None:
        data = torch.utils.data
        if isinstance(value, data.DataLoader):
            value = value.dataset
        if isinstance(value, data.TensorDataset) and len(value.tensors) == 2:
            return _numpy(value.tensors[0]), _numpy(value.tensors[1])
        if isinstance(value, data.Dataset) and hasattr(value, "__len__"):
            samples = [value[i] for i in range(len(value))]
            if not samples or not all(isinstance(s, tuple | list) and len(s) == 2 for s in samples):
                raise TrainFunctionError(
                    f"TorchTrainable.{where} is a torch Dataset whose samples are not (x, y) "
                    "pairs (or it is empty)"
                )
            return (
                np.stack([_numpy(x) for x, _ in samples]),
                np.asarray([int(_numpy(y)) for _, y in samples], dtype=np.int64),
            )
    raise TrainFunctionError(
        f"TorchTrainable.{where} is a {type(value).__name__}, but must be (features, labels) "
        "arrays, a faasml Dataset, a torch Dataset or DataLoader of (x, y) samples, or a "
        "function returning one"
    )


def _numpy(value: Any) -> Any:
    detach = getattr(value, "detach", None)
    if detach is not None:
        return detach().cpu().numpy()
    return np.asarray(value)


def combine(train: Dataset, test: Dataset, seed: int) -> tuple[Dataset, float]:
    """One data set and a test fraction such that ``Dataset.split(fraction, seed)`` gives back
    exactly ``(train, test)`` (how a function's own test set travels through a job's dataset)."""
    if train.input_shape != test.input_shape:
        raise TrainFunctionError(
            f"TorchTrainable.train has samples of shape {train.input_shape}, but test has "
            f"{test.input_shape}; they must match"
        )
    total = len(train) + len(test)
    fraction = len(test) / total
    order = np.random.default_rng(seed).permutation(total)
    at_test = np.zeros(total, dtype=bool)
    at_test[order[: round(fraction * total)]] = True
    if int(at_test.sum()) != len(test):  # pragma: no cover - guards the split's arithmetic
        raise FaasmlError("cannot lay out the test set for Dataset.split")
    dtype = np.result_type(train.features.dtype, test.features.dtype)
    features = np.empty((total, *train.input_shape), dtype=dtype)
    features[at_test], features[~at_test] = test.features, train.features
    labels = np.empty(total, dtype=np.int64)
    labels[at_test], labels[~at_test] = test.labels, train.labels
    classes = max(train.num_classes, test.num_classes)
    return Dataset(features, labels, classes), fraction


__all__ = [
    "FACTORY",
    "FunctionContext",
    "FunctionModel",
    "TorchTrainable",
    "TrainFunctionError",
    "as_dataset",
    "call_train_fn",
    "combine",
    "function_model",
    "function_structure",
    "loaded_function",
    "pack_function",
    "sign_packed",
    "unpack_blob",
    "unpack_function",
]
