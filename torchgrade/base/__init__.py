"""What every wing may use, and nothing of torch or of grading: torchgrade's version, where its own
files and its per-user cache folder are, names from students' files made fit to print, and the
table of module names from before the wings.

- ``version.py``   the version every record of a grade carries.
- ``paths.py``     the installed package's folder; the cache folder (compiled observer, reference outcomes).
- ``printable.py`` any bytes as a name a note or a writer can take.
- ``moved.py``     old module names and the modules they became (the root package aliases them).

It may import nothing of torchgrade: it is the floor.
"""
