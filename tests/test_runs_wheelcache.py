"""The wheel cache: a wheel kept whole or not at all, a damaged entry a miss, the least recently
used evicted first."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retire.runs.wheelcache import ENTRY, WheelCache, WheelKey


def key(commit: str, build: str = "uv-build") -> WheelKey:
    return WheelKey("https://git.example/acme/toylib", commit, build)


def wheel(folder, name: str = "toylib-1.0-py3-none-any.whl", size: int = 100, fill: bytes = b"w"):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes((fill * size)[:size])
    return path


def test_a_kept_wheel_comes_back_and_another_key_misses(tmp_path):
    cache = WheelCache(tmp_path / "cache")
    made = wheel(tmp_path / "out", fill=b"abc")
    kept = cache.put(key("a" * 40), made)
    assert kept is not None and kept.read_bytes() == made.read_bytes()
    assert cache.get(key("a" * 40)) == kept
    assert cache.get(key("b" * 40)) is None
    assert cache.get(key("a" * 40, build="named:0123")) is None
    assert cache.get(WheelKey(key("a" * 40).repository, "a" * 40, "uv-build", "sub")) is None
    # nothing but the entry and its description: no staging folder left behind
    assert sorted(p.name for p in kept.parent.iterdir()) == sorted([ENTRY, made.name])
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize(
    "damage",
    [
        lambda wheel, entry: wheel.write_bytes(b"altered"),
        lambda wheel, entry: wheel.write_bytes(wheel.read_bytes()[:-1] + b"x"),
        lambda wheel, entry: wheel.unlink(),
        lambda wheel, entry: entry.write_text("{not json"),
        lambda wheel, entry: entry.unlink(),
        lambda wheel, entry: entry.write_text(
            json.dumps({**json.loads(entry.read_text()), "wheel": "../../evil.whl"})
        ),
        lambda wheel, entry: entry.write_text(
            json.dumps({**json.loads(entry.read_text()), "key": {"commit": "c" * 40}})
        ),
    ],
)
def test_a_damaged_entry_is_a_miss_and_is_removed(tmp_path, damage):
    cache = WheelCache(tmp_path / "cache")
    kept = cache.put(key("a" * 40), wheel(tmp_path / "out"))
    assert kept is not None
    damage(kept, kept.parent / ENTRY)
    assert cache.get(key("a" * 40)) is None
    assert not kept.parent.exists()
    # and it can be kept again
    assert cache.put(key("a" * 40), wheel(tmp_path / "out")) is not None
    assert cache.get(key("a" * 40)) is not None


def test_the_least_recently_used_go_first_and_a_hit_counts_as_use(tmp_path):
    # three wheels and their entry.json files fit, four do not
    cache = WheelCache(tmp_path / "cache", max_bytes=3 * 1200)
    for i, commit in enumerate("abc"):
        kept = cache.put(key(commit * 40), wheel(tmp_path / "out", size=800))
        assert kept is not None
        os.utime(kept.parent / ENTRY, (1_000 + i, 1_000 + i))
    # "a" is the oldest, but it is used now
    assert cache.get(key("a" * 40)) is not None
    cache.put(key("d" * 40), wheel(tmp_path / "out", size=800))
    assert cache.get(key("b" * 40)) is None
    assert all(cache.get(key(c * 40)) is not None for c in "acd")
    # a wheel larger than the whole cache is not kept, and evicts nothing
    assert cache.put(key("e" * 40), wheel(tmp_path / "out", size=5000)) is None
    assert all(cache.get(key(c * 40)) is not None for c in "acd")


def test_a_name_that_is_not_a_wheels_is_refused(tmp_path):
    cache = WheelCache(tmp_path / "cache")
    with pytest.raises(ValueError, match="wheel"):
        cache.put(key("a" * 40), wheel(tmp_path / "out", name="toylib.tar.gz"))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("abcdefgh"), st.integers(min_value=1, max_value=900)),
        min_size=1,
        max_size=25,
    ),
    st.integers(min_value=200, max_value=3000),
)
def test_after_every_write_the_cache_fits_and_the_newest_entry_is_there(
    tmp_path_factory, writes, limit
):
    folder = tmp_path_factory.mktemp("lru")
    cache = WheelCache(folder / "cache", max_bytes=limit)
    for commit, size in writes:
        kept = cache.put(key(commit * 40), wheel(folder / "out", size=size))
        total = sum(size for _, size, _ in cache.entries())
        if kept is None:
            assert size > limit
            continue
        assert cache.get(key(commit * 40)) == kept
        # what is kept beside a wheel: its entry.json, a few hundred bytes
        assert total <= limit or len(cache.entries()) == 1
