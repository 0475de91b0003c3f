"""Shared by the tests of loading untrusted files (saved graphs, checkpoints)."""
import os


class Payload:
    """Unpickling this would create ``marker``: proof that code ran."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))
