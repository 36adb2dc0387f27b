"""`python -m torchgrade.cli check` works without installing the package (the in-notebook check runs it so)."""

from torchgrade.cli import main

main()
