"""The 8-bytes-per-id duplicate finder agrees with a plain set, and a bare hash collision passes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dense_pt.data.unique import UniqueIds


def _reference(keys: list[str]) -> tuple[str, int, int] | None:
    seen: dict[str, int] = {}
    for i, k in enumerate(keys):
        if k in seen:
            return k, seen[k], i
        seen[k] = i
    return None


@given(st.lists(st.text(alphabet="abc", max_size=3), max_size=30))
def test_first_duplicate_matches_a_set(keys):
    u = UniqueIds()
    for k in keys:
        u.add(k)
    assert len(u) == len(keys)
    assert u.first_duplicate(lambda: enumerate(keys)) == _reference(keys)


def test_hash_collision_without_duplicate_is_not_an_error():
    u = UniqueIds()
    u.add("a")
    u._hashes.append(hash("a"))  # as if "b" had collided with "a"
    assert u.suspects() == {hash("a")}
    assert u.first_duplicate(lambda: enumerate(["a", "b"])) is None


def test_no_rescan_without_suspects():
    u = UniqueIds()
    for k in ("x", "y", "z"):
        u.add(k)

    def rescan():
        raise AssertionError("must not rescan")

    assert u.first_duplicate(rescan) is None
