"""`frozen`: a class decorator that makes an immutable value class of annotated fields, as
`dataclasses.dataclass(frozen=True)` does, for the modules `flagbench size` imports (targets.py):
importing `dataclasses` (it imports inspect, ast, tokenize and dis) took 72 M of the 182 M
instructions of `flagbench size --format=bom` on a vmlinux pair (callgrind), half counting its use.

Fields are the class's annotations in order; a class attribute of the same name is its default.
Instances take fields by position or keyword, compare and hash by their values, refuse
assignment, and pickle and copy by their values."""
from __future__ import annotations

_MISSING = object()


def frozen(cls):
    names = tuple(cls.__dict__.get("__annotations__", {}))
    defaults = tuple(cls.__dict__.get(n, _MISSING) for n in names)
    for n, d in zip(names, defaults):
        if d is not _MISSING:
            delattr(cls, n)    # the instance's slot holds it

    def __init__(self, *args, **kwargs):
        if len(args) > len(names):
            raise TypeError(f"{cls.__name__}() takes {len(names)} fields, {len(args)} given")
        for n, v in zip(names, args):
            if n in kwargs:
                raise TypeError(f"{cls.__name__}() got {n!r} twice")
            kwargs[n] = v
        for n, d in zip(names, defaults):
            v = kwargs.pop(n, d)
            if v is _MISSING:
                raise TypeError(f"{cls.__name__}() is missing {n!r}")
            object.__setattr__(self, n, v)
        if kwargs:
            raise TypeError(f"{cls.__name__}() has no field {next(iter(kwargs))!r}")

    def values(self) -> tuple:
        return tuple(getattr(self, n) for n in names)

    def __setattr__(self, name, value):
        raise AttributeError(f"{cls.__name__} is frozen: cannot set {name!r}")

    def __delattr__(self, name):
        raise AttributeError(f"{cls.__name__} is frozen: cannot delete {name!r}")

    def __eq__(self, other):
        return values(self) == values(other) if other.__class__ is self.__class__ else NotImplemented

    def __hash__(self):
        return hash(values(self))

    def __reduce__(self):   # pickle and copy: the slots cannot be set after __init__
        return type(self), values(self)

    def __repr__(self):
        return f"{cls.__name__}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in names) + ")"

    ns = {"__init__": __init__, "__setattr__": __setattr__, "__delattr__": __delattr__, "__eq__": __eq__,
          "__hash__": __hash__, "__reduce__": __reduce__, "__repr__": __repr__, "__slots__": names}
    body = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
    body.update(ns)
    return type(cls.__name__, cls.__bases__, body)
