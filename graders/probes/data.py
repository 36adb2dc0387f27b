"""Probes for data.py: a CSV file written where the code runs, and the batches a loader yields."""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Any, Callable, Iterator

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from torchgrade.probes import ProbeError, Raised, Target, probe, raised


def _received(x: Any) -> str:
    """What a transform was given, in words (checks that it gets the tensor the contract promises)."""
    if isinstance(x, torch.Tensor):
        return f"{str(x.dtype).replace('torch.', '')} tensor of shape {tuple(x.shape)}"
    return type(x).__name__


#: Transforms a check may name (functions cannot cross the boundary; their names can).
TRANSFORMS: dict[str, Callable[[Any], Any]] = {
    "double": lambda x: x * 2,
    "negate": lambda x: -x,
    "add_ten": lambda y: y + 10,
    "one_hot_4": lambda y: torch.nn.functional.one_hot(y, 4),
    "received": _received,
}


@contextlib.contextmanager
def written(name: str, content: str) -> Iterator[str]:
    """Write `content` to a file called `name` in a fresh folder; yield its path; remove it after.

    The folder is made inside the working directory: in the sandbox that is the worker's private
    folder. The trusted process (which runs the reference) falls back to the system's temp folder
    when its working directory is not writable.
    """
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="csv-", dir=here if os.access(here, os.W_OK) else None) as folder:
        path = os.path.join(folder, name)
        with open(path, "w", encoding="utf-8", newline="") as f:  # newline="": "\r\n" is written as given
            f.write(content)
        yield path


def _attempt(target: Target, fn: Callable[[], Any]) -> Any:
    """Run student code; an exception becomes its plain description instead of ending the probe."""
    try:
        return target.run(fn)
    except Raised as e:
        return raised(e.error)


def _dataset(target: Target, path: str, args: tuple, kwargs: dict) -> Any:
    """The student's dataset on `path` (in place of args[0]), transforms named in kwargs looked up in TRANSFORMS."""
    kwargs = {k: TRANSFORMS[v] if k in ("transform", "target_transform") and v is not None else v
              for k, v in kwargs.items()}
    return target(path, *args[1:], **kwargs)


@probe
def csv_dataset(target: Target, args: tuple, kwargs: dict, content: str = "", indices: tuple = (),
                length: bool = True, kind: bool = False, read_all: bool = False) -> dict:
    """Write `content` to the file named args[0], build the dataset on its path, and report on it.

    Transforms in `kwargs` are names from TRANSFORMS. Reports (each when asked): whether the result
    is a torch.utils.data.Dataset, ``len(ds)``, and ``ds[i]`` for each of `indices`. With `read_all`,
    only what building the dataset and reading every row raised, wherever it raised (a dataset may
    parse its rows in ``__init__`` or when they are read).
    """
    if read_all:
        with written(args[0], content) as path:
            try:
                dataset = _dataset(target, path, args, kwargs)
                target.run(lambda: [dataset[i] for i in range(len(dataset))])
            except Raised as e:
                return {"building the dataset and reading every row": raised(e.error)}
        return {"building the dataset and reading every row": "raised nothing"}
    with written(args[0], content) as path:
        dataset = _dataset(target, path, args, kwargs)
        facts: dict[str, Any] = {}
        if kind:
            facts["is a torch.utils.data.Dataset"] = isinstance(dataset, Dataset)
        if length:
            facts["len(ds)"] = _attempt(target, lambda: len(dataset))
        for i in indices:
            facts[f"ds[{i}]"] = _attempt(target, lambda: dataset[i])
    return facts


@probe
def csv_batches(target: Target, args: tuple, kwargs: dict, content: str = "", batch_size: int = 2) -> dict:
    """Build the dataset from a file as csv_dataset does, then read it through an in-order DataLoader."""
    with written(args[0], content) as path:
        dataset = _dataset(target, path, args, kwargs)
        loader = DataLoader(dataset, batch_size=batch_size, shuffle=False)
        batches = target.run(lambda: [tuple(batch) for batch in loader])
    return {f"batch {i}": batch for i, batch in enumerate(batches)}


def _samples(batch: Any) -> list[int]:
    """The numbers in one batch from a TensorDataset of numbers (default collation: a list of one tensor)."""
    if isinstance(batch, (list, tuple)) and len(batch) == 1:
        batch = batch[0]
    if not isinstance(batch, torch.Tensor) or batch.dim() != 1:
        raise ProbeError(f"a batch is a {type(batch).__name__}; with the default collate_fn a batch from a "
                         f"TensorDataset is a list holding one 1-D tensor (pass no collate_fn)")
    return [int(v) for v in batch.tolist()]


@probe
def loader(target: Target, args: tuple, kwargs: dict, epochs: int = 1, seed: int = 0, exact: bool = False,
           iterate: bool = True, workers: bool = False, keep: tuple | None = None) -> dict:
    """Call make_loader on a TensorDataset over the tensor args[0] of numbers, and iterate it.

    Reports whether the result is a DataLoader and, per epoch, the size of each batch, whether
    the samples came in dataset order, and whether every sample came at most once; with `exact`,
    the batches themselves. Iterating draws from torch's global generator, seeded with `seed` here
    (the facts reported do not depend on which numbers are drawn). With `keep`, only the facts whose
    names end with one of its strings are reported.
    """
    numbers = args[0]
    result = target(TensorDataset(numbers), *args[1:], **kwargs)
    facts: dict[str, Any] = {"is a torch.utils.data.DataLoader": isinstance(result, DataLoader)}
    if workers:
        facts["num_workers"] = getattr(result, "num_workers", None)
    if iterate:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            orders = []
            for epoch in range(1, epochs + 1):
                batches = [_samples(b) for b in target.run(list, result)]
                seen = [v for b in batches for v in b]
                orders.append(seen)
                if exact:
                    facts[f"epoch {epoch}: batches"] = batches
                facts[f"epoch {epoch}: batch sizes"] = [len(b) for b in batches]
                facts[f"epoch {epoch}: every sample at most once"] = len(set(seen)) == len(seen)
                facts[f"epoch {epoch}: samples in dataset order"] = seen == sorted(seen)
        if epochs > 1:
            facts["every epoch in the same order"] = all(order == orders[0] for order in orders)
    return facts if keep is None else {k: v for k, v in facts.items() if k.endswith(tuple(keep))}
