"""The isolation level unprivileged-user, simulated where its user cannot start here.

As root without a usable bubblewrap, workers switch to a user of their own; on a machine whose Python
that user cannot read (a pyenv under /root) the level does not start. Tests of what the level shares
with the others (its zygote without bubblewrap, its namespaces, its cleaning) then run on this plan:
that zygote, without the user switch.
"""

from __future__ import annotations

from torchgrade.sandbox import inbox, isolation

LEVEL = "unprivileged-user"


def simulated_plans(real):
    """`isolation.plans` with the level's zygote run as the grader's own user."""

    def plans(requested):
        if requested != LEVEL:
            return real(requested)
        box = inbox.path()
        return [isolation.Plan(LEVEL, (), None, box, box, clean=("/tmp", "/var/tmp", "/dev/shm"))]

    return plans


#: The same, for a grader started as `python -c`: put before what it runs.
IN_CHILD = ("import levels, torchgrade.sandbox.isolation as isolation; "
            "isolation.plans = levels.simulated_plans(isolation.plans); ")
