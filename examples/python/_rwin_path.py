"""Finds the rwin module for the examples: the build tree's python/ (build/python next to the checkout)
when it exists, else an installed one; re-runs the example under Debian's /usr/bin/python3 when this
interpreter lacks numpy or rwin (a pyenv python3 first on PATH). Import it before numpy and rwin."""
import os
import sys

_build = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "python")
if os.path.isdir(_build) and _build not in sys.path:
    sys.path.append(_build)
try:
    import numpy  # noqa: F401
    import rwin  # noqa: F401
except ImportError:
    if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and os.access("/usr/bin/python3", os.X_OK):
        os.execv("/usr/bin/python3", ["/usr/bin/python3", *sys.argv])
    raise
