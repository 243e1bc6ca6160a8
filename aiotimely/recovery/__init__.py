"""Layer 6: snapshot stores and resume. ``Recovery`` keeps snapshots in SQLite files, one per worker; give
it to ``aiotimely.execute(..., recovery=Recovery("state/", every=10))``. What is saved and when, and what a
resumed run guarantees: the user guide's "Recovery" chapter, and :mod:`aiotimely.dataflow.state`."""

from .sqlite import Recovery as Recovery

__all__ = ["Recovery"]
