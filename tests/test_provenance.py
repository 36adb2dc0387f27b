"""Whose code a frame runs (torchgrade/sandbox/provenance.py), asked in a process of its own: its audit hook
cannot be removed once added."""

from __future__ import annotations

import subprocess
import sys
import textwrap

_SCRIPT = textwrap.dedent('''
    import os, tempfile, torch
    import torch.nn.functional as F
    from torchgrade.sandbox import provenance

    provenance.watch(tempfile.mkdtemp() + os.sep, [os.path.dirname(torch.__file__)])
    genuine = F.relu.__code__
    print("genuine", provenance.installed(genuine))
    made = compile("def relu(x):\\n    return x\\n", F.__file__, "exec").co_consts[0]
    print("compiled later under its name", provenance.installed(made))
    print("genuine again", provenance.installed(genuine))
    print("another genuine function of that file", provenance.installed(F.gelu.__code__ if hasattr(F.gelu, "__code__") else F.dropout.__code__))
''')


def test_code_compiled_under_an_installed_files_name_after_it_was_judged_is_not_installed():
    """Installed files are remembered by name (a cheaper test than a code object's id); a file that code is
    then compiled under is no longer judged by name: the code made there is not installed, the file's own
    code objects already judged stay installed, and those judged afterwards are not taken on its name."""
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = dict(line.rsplit(" ", 1) for line in out.stdout.splitlines())
    assert lines == {"genuine": "True", "compiled later under its name": "False", "genuine again": "True",
                     "another genuine function of that file": "False"}
