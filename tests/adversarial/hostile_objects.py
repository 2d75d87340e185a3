# mypy: ignore-errors
# ruff: noqa
"""Values whose every hook writes a marker: each name in TRIGGERS is one way the kernel's
helper could run the user's code to answer a keystroke (completion, hover, signature help,
the agents' `inspect_value` and `variables`, the picture a busy kernel is answered from).

Run as a cell in a kernel, or exec'd into a dict, with `MARKS` naming the folder the markers
go to; the hooks write only after `arm()` (making the values runs some of them: a dict
hashes its keys, pandas compares labels)."""

import functools
import os
import types
from unittest import mock

import numpy as np
import pandas as pd

MARKS = globals().get("MARKS", "")
_ARMED = [False]


def arm():
    _ARMED[0] = True


def disarm():
    _ARMED[0] = False


def _hit(name):
    if _ARMED[0]:
        with open(os.path.join(MARKS, name), "w") as marker:
            marker.write("ran")


# -- reading a value's type ---------------------------------------------------------------


def load_users():
    _hit("lazy_users")
    return ["ada", "grace"]


class SimpleLazyObject:
    """Django's pattern: the value is made on first use; `__class__` answers the value's."""

    def __init__(self, setup):
        self.__dict__["_setupfunc"] = setup
        self.__dict__["_wrapped"] = None

    def _setup(self):
        self.__dict__["_wrapped"] = self._setupfunc()

    def __getattr__(self, name):
        if self._wrapped is None:
            self._setup()
        return getattr(self._wrapped, name)

    @property
    def __class__(self):
        if self._wrapped is None:
            self._setup()
        return self._wrapped.__class__

    def __len__(self):
        if self._wrapped is None:
            self._setup()
        return len(self._wrapped)

    def __repr__(self):
        if self._wrapped is None:
            self._setup()
        return repr(self._wrapped)


lazy_users = SimpleLazyObject(load_users)


class ClassProperty:
    @property
    def __class__(self):
        _hit("class_property")
        return dict


class_property = ClassProperty()


class Getattribute:
    def __getattribute__(self, name):
        _hit("getattribute_obj")
        return object.__getattribute__(self, name)


getattribute_obj = Getattribute()


class Getattr:
    def __init__(self):
        self.plain = 1

    def __getattr__(self, name):
        _hit("getattr_obj")
        return self


getattr_obj = Getattr()


class Prop:
    @property
    def attr(self):
        _hit("prop_obj")
        return {"a": 1}


prop_obj = Prop()


class Desc:
    def __get__(self, obj, owner=None):
        _hit("descriptor_obj")
        return {"a": 1}


class WithDesc:
    attr = Desc()


descriptor_obj = WithDesc()


class DictProperty:
    @property
    def __dict__(self):
        _hit("dict_property_obj")
        return {"attr": 1}


dict_property_obj = DictProperty()


class MetaGetattribute(type):
    def __getattribute__(cls, name):
        _hit(cls._mark if name != "_mark" else "meta_class")
        return type.__getattribute__(cls, name)


class MetaGetattributeInstances(metaclass=MetaGetattribute):
    _mark = "meta_getattribute_obj"

    def __init__(self):
        self.attr = {"a": 1}


meta_getattribute_obj = MetaGetattributeInstances()


class MetaClass(metaclass=MetaGetattribute):
    """The class itself is hovered and called."""

    _mark = "meta_class"

    def __init__(self, x=1):
        self.x = x


meta_class = MetaClass


class MetaGetattr(type):
    def __getattr__(cls, name):
        _hit("meta_getattr_obj")
        raise AttributeError(name)


class MetaGetattrInstances(metaclass=MetaGetattr):
    pass


meta_getattr_obj = MetaGetattrInstances()


class MetaCall(type):
    def __call__(cls, *args, **kwargs):
        _hit("meta_call_class")
        return type.__call__(cls, *args, **kwargs)

    @property
    def __signature__(cls):
        _hit("meta_call_class")
        return None

    @property
    def __doc__(cls):
        _hit("meta_call_class")
        return "doc"


class MetaCalled(metaclass=MetaCall):
    def __init__(self, a, b=2):
        pass


meta_call_class = MetaCalled


class MetaEq(type):
    def __eq__(cls, other):
        _hit("meta_eq_obj")
        return type.__eq__(cls, other)

    def __ne__(cls, other):
        _hit("meta_eq_obj")
        return type.__ne__(cls, other)

    def __hash__(cls):
        _hit("meta_eq_obj")
        return type.__hash__(cls)


class MetaEqInstances(list, metaclass=MetaEq):
    pass


meta_eq_obj = MetaEqInstances([1, 2])


class HostileStr(str):
    """A str whose every method says it ran."""

    def __new__(cls, text, mark):
        made = str.__new__(cls, text)
        made.mark = mark
        return made

    def _ran(self):
        _hit(self.mark)


for _method in (
    "__eq__",
    "__ne__",
    "__hash__",
    "__lt__",
    "__repr__",
    "__str__",
    "__format__",
    "__len__",
    "__getitem__",
    "__contains__",
    "__add__",
    "__iter__",
    "startswith",
    "endswith",
    "partition",
    "split",
    "rpartition",
    "isidentifier",
    "isdigit",
    "encode",
    "strip",
):

    def _hooked(self, *args, _name=_method, **kwargs):
        self._ran()
        return getattr(str, _name)(self, *args, **kwargs)

    setattr(HostileStr, _method, _hooked)


class QualnameKind:
    pass


QualnameKind.__qualname__ = HostileStr("QualnameKind", "qualname_obj")
qualname_obj = QualnameKind()


class ModuleNameKind:
    pass


ModuleNameKind.__module__ = HostileStr("pandas.core.frame", "module_name_obj")
module_name_obj = ModuleNameKind()


# -- lengths, items and keys ----------------------------------------------------------


class LenList(list):
    def __len__(self):
        _hit("list_len")
        return list.__len__(self)


list_len = LenList([1, 2, 3])


class ItemList(list):
    def __getitem__(self, index):
        _hit("list_getitem")
        return list.__getitem__(self, index)

    def __iter__(self):
        _hit("list_getitem")
        return list.__iter__(self)


list_getitem = ItemList([{"a": 1}])


class ReprList(list):
    def __repr__(self):
        _hit("list_repr")
        return "ReprList()"


list_repr = ReprList([1])


class HookedDict(dict):
    pass


for _method in (
    "__getitem__",
    "get",
    "keys",
    "items",
    "values",
    "__iter__",
    "__len__",
    "__repr__",
    "__contains__",
    "__eq__",
):

    def _hooked(self, *args, _name=_method, **kwargs):
        _hit("dict_sub")
        return getattr(dict, _name)(self, *args, **kwargs)

    setattr(HookedDict, _method, _hooked)

dict_sub = HookedDict(a={"a": 1})


class HashKey:
    def __init__(self, mark, like="a"):
        self.mark = mark
        self.like = like

    def __hash__(self):
        _hit(self.mark)
        return hash(self.like)

    def __eq__(self, other):
        _hit(self.mark)
        return self is other

    def __lt__(self, other):
        _hit(self.mark)
        return id(self) < id(other)

    def __gt__(self, other):
        _hit(self.mark)
        return id(self) > id(other)

    def __repr__(self):
        _hit(self.mark)
        return "HashKey()"

    def __str__(self):
        _hit(self.mark)
        return "HashKey"


keys_hash = {HashKey("keys_hash", like="zz"): 1, "b": 2}
keys_eq = {HashKey("keys_eq", like="a"): 1, "a": {"a": 1}}  # the same hash as "a"
keys_lt = {HashKey("keys_lt", like="x"): 1, HashKey("keys_lt", like="y"): 2}
keys_repr = {HashKey("keys_repr", like="r"): "v"}
str_keys = {HostileStr("alpha", "str_keys"): 1, HostileStr("a", "str_keys"): {"a": 1}}


class Shown:
    def __init__(self, mark):
        self.mark = mark

    def __repr__(self):
        _hit(self.mark)
        return "Shown()"

    def __str__(self):
        _hit(self.mark)
        return "Shown"

    def __format__(self, spec):
        _hit(self.mark)
        return "Shown"

    def __lt__(self, other):
        _hit(self.mark)
        return id(self) < id(other)

    def __eq__(self, other):
        _hit(self.mark)
        return self is other

    def __hash__(self):
        _hit(self.mark)
        return id(self) >> 4

    def __len__(self):
        _hit(self.mark)
        return 1


values_repr = [Shown("values_repr"), {"k": Shown("values_repr")}]
set_of_objects = {Shown("set_of_objects"), Shown("set_of_objects")}
tuple_of_objects = (Shown("tuple_of_objects"),)
repr_obj = Shown("repr_obj")


class StrOnly:
    def __str__(self):
        _hit("str_obj")
        return "StrOnly"

    def __format__(self, spec):
        _hit("str_obj")
        return "StrOnly"


str_obj = StrOnly()


class HookedInt(int):
    def __repr__(self):
        _hit("int_sub")
        return "7"

    def __index__(self):
        _hit("int_sub")
        return int(self)

    def bit_length(self):
        _hit("int_sub")
        return 3


int_sub = HookedInt(7)


class HookedFloat(float):
    def __repr__(self):
        _hit("float_sub")
        return "1.5"


float_sub = HookedFloat(1.5)
str_sub = HostileStr("some text", "str_sub")


# -- callables ------------------------------------------------------------------------


class CallableGetattr:
    def __call__(self, x):
        _hit("callable_getattr")

    def __getattr__(self, name):
        _hit("callable_getattr")
        raise AttributeError(name)


callable_getattr = CallableGetattr()


class SignatureProperty:
    def __call__(self, x):
        _hit("signature_prop")

    @property
    def __signature__(self):
        _hit("signature_prop")
        return None


signature_prop = SignatureProperty()


class Unwrappable:
    def __getattr__(self, name):
        _hit("wrapped_func")
        raise AttributeError(name)

    def __call__(self, *args):
        _hit("wrapped_func")


def wrapped_func(x, y=1):
    return x


wrapped_func.__wrapped__ = Unwrappable()


def default_repr_func(x, fallback=Shown("default_repr_func")):
    return x


class MetaNamed(type):
    def __getattribute__(cls, name):
        if name in ("__module__", "__qualname__", "__name__", "__repr__"):
            _hit("annotation_func")
        return type.__getattribute__(cls, name)

    def __repr__(cls):
        _hit("annotation_func")
        return "Named"


class Named(metaclass=MetaNamed):
    pass


def annotation_func(x: Named, y: Shown("annotation_func") = 1) -> list[Named]:
    return x


class DocProperty:
    def __call__(self):
        pass

    @property
    def __doc__(self):
        _hit("doc_prop_callable")
        return "doc"


doc_prop_callable = DocProperty()


class DocDescriptor:
    def __get__(self, obj, owner=None):
        _hit("class_doc_descriptor")
        return "doc"


class ClassDocDescriptor:
    __doc__ = DocDescriptor()

    def __init__(self, a):
        self.a = a


class_doc_descriptor = ClassDocDescriptor


def _partial_target(x, y):
    return x


partial_hostile = functools.partial(CallableGetattr(), 1)


class WithIpythonKeys:
    def _ipython_key_completions_(self):
        _hit("ipython_keys")
        return ["a"]


ipython_keys = WithIpythonKeys()
mock_obj = mock.MagicMock(side_effect=lambda *a, **k: _hit("mock_obj"))
mock_obj.__len__.side_effect = lambda *a: _hit("mock_obj") or 1
mock_obj.__repr__ = lambda *a: _hit("mock_obj") or "MagicMock()"


class HostileError(Exception):
    def __str__(self):
        _hit("exception_obj")
        return "boom"

    def __repr__(self):
        _hit("exception_obj")
        return "HostileError()"


exception_obj = HostileError("x")


class ModuleSub(types.ModuleType):
    def __getattr__(self, name):
        _hit("module_sub")
        raise AttributeError(name)

    def __getattribute__(self, name):
        if name not in ("__dict__",):
            _hit("module_sub")
        return types.ModuleType.__getattribute__(self, name)

    def __repr__(self):
        _hit("module_sub")
        return "<module>"


module_sub = ModuleSub("module_sub")


class Slotted:
    __slots__ = ("attr", "other")

    def __init__(self):
        self.other = {"a": 1}

    def __getattr__(self, name):
        _hit("slots_getattr")
        return {"a": 1}


slots_getattr = Slotted()


# -- libraries' objects holding the user's ------------------------------------------


frame_labels = pd.DataFrame(
    [[1, 2]], columns=[HashKey("frame_labels", like="c1"), HashKey("frame_labels", like="c2")]
)
np_objects = np.array([Shown("np_objects"), Shown("np_objects")], dtype=object)
series_objects = pd.Series([Shown("series_objects"), Shown("series_objects")])
index_objects = pd.Index([HashKey("index_objects", like="i1"), HashKey("index_objects", like="i2")])
category_objects = pd.Series(
    [HashKey("category_objects", like="k1"), HashKey("category_objects", like="k2")],
    dtype="category",
)


class FrameSub(pd.DataFrame):
    @property
    def _constructor(self):
        return FrameSub

    def __repr__(self):
        _hit("frame_subclass")
        return "FrameSub"

    def __getattr__(self, name):
        _hit("frame_subclass")
        return pd.DataFrame.__getattr__(self, name)


frame_subclass = FrameSub({"a": [1]})


class FakeFrame:
    """Says it is pandas's DataFrame."""

    __module__ = "pandas.core.frame"
    __qualname__ = "DataFrame"

    @property
    def columns(self):
        _hit("fake_library")
        return ["a"]

    @property
    def dtypes(self):
        _hit("fake_library")
        return ["int64"]

    @property
    def shape(self):
        _hit("fake_library")
        return (1, 1)

    def __repr__(self):
        _hit("fake_library")
        return "FakeFrame"


fake_library = FakeFrame()


class UserArray(np.ndarray):
    def __repr__(self):
        _hit("ndarray_subclass")
        return "UserArray"

    @property
    def shape_hint(self):
        _hit("ndarray_subclass")


ndarray_subclass = np.arange(3).view(UserArray)

# A namespace key that is not a plain str (`globals()[...] = ...`).
globals()[HostileStr("ns_str_key", "ns_str_key")] = {"a": 1}

TRIGGERS = (
    "lazy_users",
    "class_property",
    "getattribute_obj",
    "getattr_obj",
    "prop_obj",
    "descriptor_obj",
    "dict_property_obj",
    "meta_getattribute_obj",
    "meta_class",
    "meta_getattr_obj",
    "meta_call_class",
    "meta_eq_obj",
    "qualname_obj",
    "module_name_obj",
    "list_len",
    "list_getitem",
    "list_repr",
    "dict_sub",
    "keys_hash",
    "keys_eq",
    "keys_lt",
    "keys_repr",
    "str_keys",
    "values_repr",
    "set_of_objects",
    "tuple_of_objects",
    "repr_obj",
    "str_obj",
    "int_sub",
    "float_sub",
    "str_sub",
    "callable_getattr",
    "signature_prop",
    "wrapped_func",
    "default_repr_func",
    "annotation_func",
    "doc_prop_callable",
    "class_doc_descriptor",
    "partial_hostile",
    "ipython_keys",
    "mock_obj",
    "exception_obj",
    "module_sub",
    "slots_getattr",
    "frame_labels",
    "np_objects",
    "series_objects",
    "index_objects",
    "category_objects",
    "frame_subclass",
    "fake_library",
    "ndarray_subclass",
    "ns_str_key",
)
"""Each a name above and the marker its hooks write (`partial_hostile` writes
`callable_getattr`'s)."""
