# /// script
# requires-python = ">=3.11"
# dependencies = []
# ///
"""Exit 0 when the reply (argv[1]) names the expected English word (argv[2]), else 1."""

import re
import sys

reply, expected = sys.argv[1], sys.argv[2]
words = re.findall(r"[a-z]+", reply.lower())
sys.exit(0 if words == [expected.lower()] else 1)
