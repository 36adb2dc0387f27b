# Attack: tensors.py never finishes importing.
# Holds because: the import has the time limit of one check; a module whose import timed out fails
# its other targets at once, with the same message, instead of timing out once per check.
while True:
    pass
