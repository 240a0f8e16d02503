"""How much of one sync runs at once; the process sizes its threads and connections by it."""

from typing import Final

MAX_CONCURRENT_WRITES: Final = 8
"""At most this many writes of one sync are in flight at once."""
