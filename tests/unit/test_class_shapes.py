"""Trust is decided by what a class is (issue 19, item 5): data-only shapes pass, classes that act do not.

Real classes of the standard library and of packages in the environment are checked (a
file could call any of them with arguments of its choosing once trusted), next to
hand-written shapes that differ from a data-only one in exactly one way.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import importlib
import sys
import typing

import pytest

from mmfix._checkpoint import class_shapes, safe_globals


@dataclasses.dataclass
class Point:
    x: int = 0
    tags: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, order=True)
class FrozenPoint:
    x: int = 0


if sys.version_info >= (3, 10):

    @dataclasses.dataclass(slots=True)
    class SlottedPoint:
        x: int = 0

else:  # dataclass(slots=True) is Python 3.10+: 3.9's spelling of a slotted dataclass

    @dataclasses.dataclass
    class SlottedPoint:  # type: ignore[no-redef]
        __slots__ = ("x",)
        x: int


@dataclasses.dataclass
class Point3(Point):
    z: int = 0


class Pair(typing.NamedTuple):
    a: int
    b: str = "b"

    def total(self) -> str:  # an ordinary method: nothing in a load calls it
        return f"{self.a}{self.b}"


OldPair = collections.namedtuple("OldPair", "a b")


class Record:
    """Construction and state inherited from object; ordinary methods and a read-only property."""

    kind = "record"

    def describe(self) -> str:
        return self.kind

    @property
    def upper(self) -> str:
        return self.kind.upper()


class SubRecord(Record):
    pass


DATA_ONLY = [Point, FrozenPoint, SlottedPoint, Point3, Pair, OldPair, Record, SubRecord]


@pytest.mark.parametrize("cls", DATA_ONLY, ids=lambda c: c.__name__)
def test_data_only_shapes_are_trusted(cls: type) -> None:
    assert class_shapes.shape_problem(cls) is None
    assert safe_globals.trust_problem(cls, f"{cls.__module__}.{cls.__qualname__}") is None


def _acting_shapes() -> dict[str, type]:
    def cls(name: str, body: dict, bases: tuple = (object,)) -> type:
        return type(name, bases, dict(body))

    @dataclasses.dataclass
    class PostInit:
        x: int = 0

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass
    class Factory:
        x: collections.deque = dataclasses.field(default_factory=collections.deque)

    @dataclasses.dataclass
    class CustomRepr:
        x: int = 0

        def __repr__(self) -> str:
            return "x"

    class PairWithHash(typing.NamedTuple):
        a: int

        def __hash__(self) -> int:
            return 1

    class Color(enum.Enum):
        RED = 1

    class WithSetter:
        @property
        def path(self) -> str:
            return ""

        @path.setter
        def path(self, value: str) -> None:
            pass

    return {
        "own __init__": cls("Init", {"__init__": lambda self, path: None}),
        "own __new__": cls("New", {"__new__": lambda c: object.__new__(c)}),
        "own __setstate__": cls("SetState", {"__setstate__": lambda self, s: None}),
        "own __getattr__": cls("GetAttr", {"__getattr__": lambda self, n: None}),
        "own __setattr__": cls("SetAttr", {"__setattr__": lambda self, n, v: None}),
        "own __del__": cls("Del", {"__del__": lambda self: None}),
        "own __eq__": cls("Eq", {"__eq__": lambda self, o: True, "__hash__": lambda self: 1}),
        "own __iter__": cls("Iter", {"__iter__": lambda self: iter(())}),
        "own __repr__": cls("Repr", {"__repr__": lambda self: ""}),
        "own __reduce__": cls("Reduce", {"__reduce__": lambda self: (object, ())}),
        "own __init_subclass__": cls("Sub", {"__init_subclass__": classmethod(lambda c: None)}),
        "__dict__ replaced": cls("Dict", {"__dict__": property(lambda self: {})}),
        "property setter": WithSetter,
        "base with __init__": cls("Child", {}, (cls("Parent", {"__init__": lambda self: None}),)),
        "__post_init__": PostInit,
        "default_factory": Factory,
        "hand-written __repr__ on a dataclass": CustomRepr,
        "NamedTuple with __hash__": PairWithHash,
        "enum": Color,
        "metaclass": type("Meta", (type,), {}),
        "dict subclass": cls("D", {}, (dict,)),
        "abc": cls("A", {}, (importlib.import_module("abc").ABC,)),
    }


@pytest.mark.parametrize("case", list(_acting_shapes()))
def test_a_class_with_code_of_its_own_in_a_load_is_not_trusted(case: str) -> None:
    cls = _acting_shapes()[case]
    assert class_shapes.shape_problem(cls) is not None, case


# Real classes that open, create or truncate files, or bind sockets, when constructed.
REAL_ACTORS = [
    "wave.Wave_write",
    "mailbox.mbox",
    "mailbox.Maildir",
    "socketserver.TCPServer",
    "socketserver.UnixStreamServer",
    "zipfile.ZipFile",
    "tarfile.TarFile",
    "logging.FileHandler",
    "io.FileIO",
    "tempfile.NamedTemporaryFile",
    "http.server.HTTPServer",
    "xml.etree.ElementTree.ElementTree",
    "codecs.StreamReaderWriter",
    "scipy.io._fortran.FortranFile",
    "scipy.io._netcdf.netcdf_file",
    "cv2.VideoWriter",
]


@pytest.mark.parametrize("name", REAL_ACTORS)
def test_real_classes_that_act_are_never_trusted_nor_suggested(name: str) -> None:
    module_name, _, attr = name.rpartition(".")
    module = pytest.importorskip(module_name)
    obj = getattr(module, attr)
    assert safe_globals.trust_problem(obj, name) is not None
    assert safe_globals.suggestion_for(name) is None
    kind, _why = safe_globals.assess(name)
    assert kind != "trustable"


def test_the_trust_line_is_offered_for_an_imported_data_only_class_only() -> None:
    name = f"{Point.__module__}.Point"
    assert safe_globals.suggestion_for(name) == name
    assert safe_globals.assess(name) == ("trustable", None)
    assert safe_globals.suggestion_for("wave.Wave_write") is None
