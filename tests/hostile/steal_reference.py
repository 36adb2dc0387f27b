# Attack: find the reference solution (by searching the disk, /proc/*/cwd, the grader's command
# line, the graders package's folder) and hand in its gather instead of one's own.
# Holds from: bwrap (only the submission, Python and the graders package, minus its checks, exist
# in the sandbox). Without it the reference is readable by whoever can read the course folder.
import hostile_kit as kit
import torch


def _steal():
    for path in kit.find_files("tensors.py"):
        try:
            candidate = kit.load(path, "gather")
            if candidate(torch.tensor([[1, 2], [3, 4]]), 1, torch.tensor([[1, 0], [0, 1]])).tolist() == [[2, 1], [3, 4]]:
                return candidate
        except Exception:
            pass
    return None


_stolen = []


def gather(x, dim, index):
    if not _stolen:
        _stolen.append(_steal())
    stolen = _stolen[0]
    if stolen is None:
        raise NotImplementedError("found no solution to copy")
    return stolen(x, dim, index)
