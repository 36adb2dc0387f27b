# Attack: the submission holds helper.py, a symlink to the reference solution, and gather comes
# from it.
# Holds because: a submission is staged into the sandbox by copying regular files only; symlinks
# are left behind (and under bubblewrap would point nowhere).


def gather(x, dim, index):
    from helper import gather as borrowed

    return borrowed(x, dim, index)
