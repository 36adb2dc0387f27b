# Attack: gather hoards memory, 256 MB at a time, until something gives.
# Holds because: the worker's address space is capped: the allocation fails in the worker alone,
# long before the machine runs out.
import torch


def gather(x, dim, index):
    hoard = []
    try:
        for _ in range(10_000):
            hoard.append(torch.empty(2**28, dtype=torch.uint8))
            hoard[-1][:2**20].fill_(1)
    except (RuntimeError, MemoryError):
        pass
    print(f"hoarded {len(hoard) * 256} MB")
