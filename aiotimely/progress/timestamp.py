"""Timestamps and path summaries: the partial orders progress tracking reasons about.

A timestamp type needs a partial order (``less_equal``), a total order by ``<``
that extends it (used only to sort and to process work smallest first), a unique
minimum, and a *path summary* type describing what a path through the dataflow
does to a time (``results_in``, ``followed_by``, ``less_equal``).

Built in:

* ``int`` — non-negative integers up to :data:`INT_MAX` (timely's ``u64``).
  Its summaries are plain non-negative ``int`` constants ("add ``s``");
  ``results_in`` returns ``None`` when the sum would exceed :data:`INT_MAX`,
  which is what lets a bounded loop drop what falls off its end.
* :class:`Product` ``(outer, inner)`` — the product partial order, used by
  iterative scopes; its summaries are ``Product`` s of summaries, applied
  componentwise.
* any class implementing the :class:`Timestamp` protocol, with a ``Summary``
  class implementing :class:`PathSummary` whose no-argument constructor is the
  identity summary.

The engine never calls methods on ``int`` s or ``Product`` s in its hot paths:
it asks :func:`timestamp_type` once per scope for a :class:`TimestampType`,
whose functions are specialised for that type.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Generic, NamedTuple, Protocol, TypeVar, runtime_checkable

__all__ = [
    "INT_MAX",
    "Timestamp",
    "PathSummary",
    "Product",
    "TimestampType",
    "IntType",
    "ProductType",
    "ProtocolType",
    "INT",
    "timestamp_type",
    "less_equal",
    "less_than",
    "results_in",
    "followed_by",
    "Refinement",
]

INT_MAX = 2**64 - 1
"""The largest ``int`` timestamp (as timely's ``u64``); summaries that would pass it yield ``None``."""

T = TypeVar("T")
S = TypeVar("S")


@runtime_checkable
class PathSummary(Protocol[T]):
    """What a path through the dataflow does to a timestamp."""

    def results_in(self, time: T) -> T | None:
        """The time a record at ``time`` has after the path, or ``None`` if it cannot pass."""

    def followed_by(self, other: Any) -> Any | None:
        """This path followed by ``other``; ``None`` if nothing can pass both."""

    def less_equal(self, other: Any) -> bool:
        """True if this summary never yields a later time than ``other``, for any input."""


@runtime_checkable
class Timestamp(Protocol):
    """A partially ordered logical time; ``<`` must be a total order extending ``less_equal``."""

    def less_equal(self, other: Any) -> bool: ...

    def __lt__(self, other: Any) -> bool: ...

    def __hash__(self) -> int: ...

    @classmethod
    def minimum(cls) -> Any: ...


class Product(NamedTuple):
    """A pair of times ordered componentwise: ``(o1, i1) <= (o2, i2)`` iff both coordinates are.

    ``less_equal``/``less_than`` give the product partial order, which is what all
    progress semantics use. ``<``, ``<=`` and ``sorted`` use the lexicographic tuple
    order, a linear extension of it, used only to sort. A ``Product`` of summaries
    is a summary, applied componentwise.
    """

    outer: Any
    inner: Any

    def less_equal(self, other: Product) -> bool:
        return less_equal(self.outer, other.outer) and less_equal(self.inner, other.inner)

    def less_than(self, other: Product) -> bool:
        return self != other and self.less_equal(other)

    def results_in(self, time: Product) -> Product | None:
        outer = results_in(self.outer, time.outer)
        if outer is None:
            return None
        inner = results_in(self.inner, time.inner)
        if inner is None:
            return None
        return Product(outer, inner)

    def followed_by(self, other: Product) -> Product | None:
        outer = followed_by(self.outer, other.outer)
        if outer is None:
            return None
        inner = followed_by(self.inner, other.inner)
        if inner is None:
            return None
        return Product(outer, inner)

    def __repr__(self) -> str:
        return f"Product({self.outer!r}, {self.inner!r})"


# Generic, dispatching helpers: convenient for users and for small antichains.
# The tracker uses the specialised functions of a TimestampType instead.


def less_equal(a: Any, b: Any) -> bool:
    """The partial order on times (or on summaries) of any supported type."""
    if type(a) is int:
        le: bool = a <= b
        return le
    if type(a) is Product:
        return less_equal(a[0], b[0]) and less_equal(a[1], b[1])
    le = a.less_equal(b)
    return le


def less_than(a: Any, b: Any) -> bool:
    """Strictly before in the partial order."""
    return a != b and less_equal(a, b)


def results_in(summary: Any, time: Any) -> Any | None:
    """Apply a path summary to a time; ``None`` if nothing can travel the path at that time."""
    if type(summary) is int:
        t = time + summary
        return t if t <= INT_MAX else None
    return summary.results_in(time)


def followed_by(first: Any, second: Any) -> Any | None:
    """Compose two path summaries: ``first``, then ``second``."""
    if type(first) is int:
        s = first + second
        return s if s <= INT_MAX else None
    return first.followed_by(second)


class TimestampType(Generic[T, S]):
    """The operations on one timestamp type, specialised once and reused in hot loops.

    Attributes are plain functions (not methods) so that callers can bind them to
    locals: ``le = ttype.less_equal``.
    """

    name: str
    minimum: T
    identity: S
    totally_ordered: bool
    less_equal: Callable[[T, T], bool]
    results_in: Callable[[S, T], T | None]
    followed_by: Callable[[S, S], S | None]
    summary_less_equal: Callable[[S, S], bool]

    def less_than(self, a: T, b: T) -> bool:
        return a != b and self.less_equal(a, b)

    def check_time(self, time: Any) -> None:
        """Raise ``TypeError``/``ValueError`` naming the problem if ``time`` is not of this type."""

    def check_summary(self, summary: Any) -> None:
        """Raise ``TypeError``/``ValueError`` if ``summary`` is not a valid summary of this type."""

    def encode(self, time: T) -> Any:
        """A msgpack-friendly form of ``time`` (ints and nested lists)."""
        return time

    def decode(self, data: Any) -> T:
        """The time :meth:`encode` gave ``data`` for; ``TypeError``/``ValueError`` if malformed."""
        self.check_time(data)
        time: T = data
        return time

    def advances(self, summary: S) -> bool:
        """True if the summary strictly advances every time: it is not ``<=`` the identity.

        Summaries never move time backwards, so a summary ``<=`` the identity is the
        identity; for the built-in types every other summary strictly advances.
        """
        return not self.summary_less_equal(summary, self.identity)

    def __repr__(self) -> str:
        return self.name


def _int_results_in(s: int, t: int) -> int | None:
    t = t + s
    return t if t <= INT_MAX else None


class IntType(TimestampType[int, int]):
    """Non-negative ``int`` times; summaries are non-negative ``int`` increments."""

    name = "int"
    minimum = 0
    identity = 0
    totally_ordered = True
    less_equal = staticmethod(operator.le)   # (the C function: a third of what a Python one costs a call)
    results_in = staticmethod(_int_results_in)
    followed_by = staticmethod(_int_results_in)
    summary_less_equal = staticmethod(operator.le)

    def check_time(self, time: Any) -> None:
        if type(time) is not int:
            raise TypeError(f"expected an int timestamp, got {time!r} ({type(time).__name__})")
        if not 0 <= time <= INT_MAX:
            raise ValueError(f"int timestamps must lie in 0..2**64-1, got {time!r}")

    def check_summary(self, summary: Any) -> None:
        if type(summary) is not int:
            raise TypeError(f"expected an int path summary, got {summary!r} ({type(summary).__name__})")
        if not 0 <= summary <= INT_MAX:
            raise ValueError(f"int path summaries add a constant in 0..2**64-1, got {summary!r}")


INT = IntType()
"""The :class:`TimestampType` of ``int`` times."""


class ProductType(TimestampType[Product, Product]):
    """``Product(outer, inner)`` times of two component types, ordered componentwise."""

    totally_ordered = False

    def __init__(self, outer: TimestampType[Any, Any], inner: TimestampType[Any, Any]) -> None:
        self.outer = outer
        self.inner = inner
        self.name = f"Product[{outer.name}, {inner.name}]"
        new = tuple.__new__
        self.minimum = new(Product, (outer.minimum, inner.minimum))
        self.identity = new(Product, (outer.identity, inner.identity))
        ole, ile = outer.less_equal, inner.less_equal
        ori, iri = outer.results_in, inner.results_in
        ofb, ifb = outer.followed_by, inner.followed_by
        osle, isle = outer.summary_less_equal, inner.summary_less_equal
        less_equal: Callable[[Product, Product], bool]
        results_in: Callable[[Product, Product], Product | None]
        followed_by: Callable[[Product, Product], Product | None]
        summary_less_equal: Callable[[Product, Product], bool]

        if outer is INT and inner is INT:
            # The common case (one level of iteration over int times), inlined.
            def less_equal(a: tuple[int, int], b: tuple[int, int]) -> bool:
                return a[0] <= b[0] and a[1] <= b[1]

            def results_in(s: Product, t: Product) -> Product | None:
                o = t[0] + s[0]
                i = t[1] + s[1]
                if o > INT_MAX or i > INT_MAX:
                    return None
                return new(Product, (o, i))

            followed_by = results_in
            summary_less_equal = less_equal
        else:

            def less_equal(a: Product, b: Product) -> bool:
                return ole(a[0], b[0]) and ile(a[1], b[1])

            def results_in(s: Product, t: Product) -> Product | None:
                o = ori(s[0], t[0])
                if o is None:
                    return None
                i = iri(s[1], t[1])
                if i is None:
                    return None
                return new(Product, (o, i))

            def followed_by(s1: Product, s2: Product) -> Product | None:
                o = ofb(s1[0], s2[0])
                if o is None:
                    return None
                i = ifb(s1[1], s2[1])
                if i is None:
                    return None
                return new(Product, (o, i))

            def summary_less_equal(s1: Product, s2: Product) -> bool:
                return osle(s1[0], s2[0]) and isle(s1[1], s2[1])

        self.less_equal = less_equal
        self.results_in = results_in
        self.followed_by = followed_by
        self.summary_less_equal = summary_less_equal

    def encode(self, time: Product) -> Any:
        return (self.outer.encode(time[0]), self.inner.encode(time[1]))

    def decode(self, data: Any) -> Product:
        if type(data) not in (tuple, list) or len(data) != 2:
            raise TypeError(f"expected a pair for a {self.name} timestamp, got {data!r}")
        return tuple.__new__(Product, (self.outer.decode(data[0]), self.inner.decode(data[1])))

    def check_time(self, time: Any) -> None:
        if type(time) is not Product:
            raise TypeError(f"expected a Product timestamp of {self.name}, got {time!r}")
        self.outer.check_time(time.outer)
        self.inner.check_time(time.inner)

    def check_summary(self, summary: Any) -> None:
        if type(summary) is not Product:
            raise TypeError(f"expected a Product path summary for {self.name}, got {summary!r}")
        self.outer.check_summary(summary.outer)
        self.inner.check_summary(summary.inner)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ProductType) and self.outer == other.outer and self.inner == other.inner
        )

    def __hash__(self) -> int:
        return hash((ProductType, self.outer, self.inner))


class ProtocolType(TimestampType[Any, Any]):
    """A user class implementing :class:`Timestamp`, with ``cls.Summary`` implementing :class:`PathSummary`."""

    def __init__(self, cls: type[Any], *, totally_ordered: bool = False) -> None:
        missing = [a for a in ("less_equal", "minimum", "Summary") if getattr(cls, a, None) is None]
        if cls.__lt__ is object.__lt__:  # type: ignore[operator]  # typeshed omits object.__lt__
            missing.append("__lt__")
        if cls.__hash__ is None:
            missing.append("__hash__")
        if missing:
            raise TypeError(
                f"{cls.__name__} cannot be used as a timestamp: it lacks {', '.join(missing)} "
                "(see aiotimely.Timestamp)"
            )
        summary_cls = cls.Summary
        for attr in ("results_in", "followed_by", "less_equal"):
            if not callable(getattr(summary_cls, attr, None)):
                raise TypeError(
                    f"{cls.__name__}.Summary cannot be used as a path summary: it lacks {attr!r} "
                    "(see aiotimely.PathSummary)"
                )
        self.cls = cls
        self.name = cls.__name__
        self.minimum = cls.minimum()
        self.identity = summary_cls()
        self.totally_ordered = totally_ordered
        self.less_equal = cls.less_equal
        self.results_in = lambda s, t: s.results_in(t)
        self.followed_by = lambda s1, s2: s1.followed_by(s2)
        self.summary_less_equal = summary_cls.less_equal

    def encode(self, time: Any) -> Any:
        to_tuple = getattr(time, "to_tuple", None)
        if to_tuple is None:
            raise TypeError(
                f"{self.name} timestamps cannot cross processes: give the class to_tuple() "
                "and a classmethod from_tuple(tuple)"
            )
        return to_tuple()

    def decode(self, data: Any) -> Any:
        from_tuple = getattr(self.cls, "from_tuple", None)
        if from_tuple is None:
            raise TypeError(f"{self.name} timestamps cannot be decoded: the class lacks from_tuple")
        return from_tuple(data)

    def check_time(self, time: Any) -> None:
        if not isinstance(time, self.cls):
            raise TypeError(f"expected a {self.name} timestamp, got {time!r}")

    def check_summary(self, summary: Any) -> None:
        if not isinstance(summary, self.cls.Summary):
            raise TypeError(f"expected a {self.name}.Summary path summary, got {summary!r}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProtocolType) and self.cls is other.cls

    def __hash__(self) -> int:
        return hash((ProtocolType, self.cls))


def timestamp_type(spec: Any) -> TimestampType[Any, Any]:
    """The :class:`TimestampType` for ``spec``: ``int``, a ``TimestampType``, or a protocol class."""
    if isinstance(spec, TimestampType):
        return spec
    if spec is int:
        return INT
    if spec is Product:
        raise TypeError("Product needs its component types: use ProductType(INT, INT) and the like")
    if isinstance(spec, type):
        return ProtocolType(spec)
    raise TypeError(f"not a timestamp type: {spec!r}")


class Refinement:
    """How an inner scope's times relate to its parent's (timely's ``Refines``).

    ``to_inner`` maps a time entering the scope, ``to_outer`` a time leaving it, and
    ``summarize`` an inner path summary to what it guarantees outside (it must never
    claim more advance than really happens).
    """

    def __init__(
        self,
        outer: TimestampType[Any, Any],
        inner: TimestampType[Any, Any],
        to_inner: Callable[[Any], Any],
        to_outer: Callable[[Any], Any],
        summarize: Callable[[Any], Any],
        kind: str,
    ) -> None:
        self.outer = outer
        self.inner = inner
        self.to_inner = to_inner
        self.to_outer = to_outer
        self.summarize = summarize
        self.kind = kind

    @classmethod
    def region(cls, ttype: TimestampType[Any, Any]) -> Refinement:
        """A region: the same timestamp as the parent."""
        ident = _identity
        return cls(ttype, ttype, ident, ident, ident, "region")

    @classmethod
    def iterative(cls, outer: TimestampType[Any, Any], inner: TimestampType[Any, Any] = INT) -> Refinement:
        """An iterative scope: ``Product(outer, inner)`` times; entering starts the inner coordinate at its minimum."""
        ptype = ProductType(outer, inner)
        new = tuple.__new__
        inner_min = inner.minimum

        def to_inner(t: Any) -> Product:
            return new(Product, (t, inner_min))

        def outer_part(p: Product) -> Any:
            return p[0]

        return cls(outer, ptype, to_inner, outer_part, outer_part, "iterative")

    def __repr__(self) -> str:
        return f"Refinement.{self.kind}({self.outer!r} -> {self.inner!r})"


def _identity(x: Any) -> Any:
    return x

