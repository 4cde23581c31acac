# /// script
# dependencies = ["packaging>=23"]
# ///
"""Score one reply: 1.0 when it is exactly the gold version (compared as PEP 440 versions), else 0.0."""

import sys

from packaging.version import InvalidVersion, Version

gold, reply = sys.argv[1], sys.argv[2].strip()
try:
    print(1.0 if Version(reply) == Version(gold) else 0.0)
except InvalidVersion:
    print(0.0)
