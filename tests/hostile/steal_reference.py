# Attack: find the reference solution (by searching the disk, /proc/*/cwd, the grader's command
# line, the graders package's folder) and hand in its gather instead of one's own.
# Holds from: bwrap (only the submission, Python and the graders package, minus its checks, exist
# in the sandbox). Without it the reference is readable by whoever can read the course folder.
import hostile_kit as kit
import torch


#: (x, dim, index) -> what a right gather returns: a copy that gets one of these wrong is not the reference.
CASES = [
    (([[1, 2], [3, 4]], 1, [[1, 0], [0, 1]]), [[2, 1], [3, 4]]),
    (([[1, 2], [3, 4]], 0, [[1, 0], [0, 0]]), [[3, 2], [1, 2]]),
    (([[[0, 1], [2, 3]], [[4, 5], [6, 7]]], -1, [[[1], [0]], [[0], [1]]]), [[[1], [2]], [[4], [7]]]),
]


def _right(candidate):
    return all(candidate(torch.tensor(x), dim, torch.tensor(index)).tolist() == expected
               for (x, dim, index), expected in CASES)


def _steal():
    # A folder called reference first: the disk holds other tensors.py (other submissions) too.
    for path in sorted(kit.find_files("tensors.py"), key=lambda p: "/reference/" not in p):
        try:
            candidate = kit.load(path, "gather")
            if _right(candidate):
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
