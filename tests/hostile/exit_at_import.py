# Attack: sys.exit(0) at import, hoping a grader reads "exit status 0" as success.
# Holds because: the import runs in a sandbox worker; SystemExit there is an import failure.
import sys

sys.exit(0)
