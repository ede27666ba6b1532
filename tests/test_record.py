"""record.frozen: the value class targets.py's records are made with (instead of dataclasses)."""
import pytest

from flagbench.record import frozen
from flagbench.targets import TARGETS, get_target


@frozen
class Point:
    x: int
    y: int = 0
    tags: tuple = ()

    @property
    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)


def test_fields_by_position_and_keyword_with_defaults():
    p = Point(1, y=2)
    assert (p.x, p.y, p.tags, p.norm1) == (1, 2, (), 3)
    assert Point(3).y == 0
    assert repr(Point(1, 2)) == "Point(x=1, y=2, tags=())"


def test_values_compare_and_hash_and_cannot_change():
    assert Point(1, 2) == Point(1, 2) and Point(1, 2) != Point(2, 1)
    assert len({Point(1, 2), Point(1, 2), Point(2, 1)}) == 2
    with pytest.raises(AttributeError, match="frozen"):
        Point(1).x = 5
    with pytest.raises(AttributeError, match="frozen"):
        del Point(1).y


@pytest.mark.parametrize("args, kwargs, message", [
    ((), {}, "missing 'x'"), ((1, 2, (), 4), {}, "takes 3 fields"), ((1,), {"x": 2}, "'x' twice"),
    ((1,), {"z": 2}, "no field 'z'")])
def test_wrong_fields_are_refused(args, kwargs, message):
    with pytest.raises(TypeError, match=message):
        Point(*args, **kwargs)


def test_they_pickle_and_copy_by_value():
    import copy
    import pickle
    t = get_target("aarch64")
    for again in (pickle.loads(pickle.dumps(t)), copy.copy(t), copy.deepcopy(t)):
        assert again == t and again.boot == t.boot and type(again) is type(t)
    assert pickle.loads(pickle.dumps(Point(1, 2, ("a",)))) == Point(1, 2, ("a",))


def test_the_targets_are_such_records():
    t = get_target("x86_64")
    assert t == TARGETS["x86_64"] and hash(t) == hash(TARGETS["x86_64"])
    assert t.boot.memory == "256M" and t.kbuild.arch == "x86_64"
    with pytest.raises(AttributeError):
        t.gcc = "clang"
