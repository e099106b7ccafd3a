"""eventlake: a self-hosted Segment Data Lakes replacement."""

__version__ = "0.1.0"
