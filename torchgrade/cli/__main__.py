"""`python -m torchgrade.cli check` works without installing the package (the in-notebook check runs it so)."""

from torchgrade.cli import main

if __name__ == "__main__":  # (imported by anything else, e.g. a walk of the package's modules, it runs nothing)
    main()
