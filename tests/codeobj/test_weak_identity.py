"""Per-code caches tell code objects apart by identity: equal code from two files is two keys."""

import gc

from framejit.weak_identity import WeakIdentityKeyDict

SOURCE = "def visual_embed(x, n):\n    return [n - v for v in x]\n"


def code_of(filename):
    namespace = {}
    exec(compile(SOURCE, filename, "exec"), namespace)
    return namespace["visual_embed"].__code__


def test_equal_code_objects_from_two_files_are_two_keys():
    first, second = code_of("model_a.py"), code_of("model_b.py")
    assert first == second and first is not second  # why a WeakKeyDictionary mixed them up
    cache = WeakIdentityKeyDict()
    cache[first] = "a"
    assert second not in cache and cache.get(second) is None
    cache.setdefault(second, "b")
    assert (cache[first], cache[second], len(cache)) == ("a", "b", 2)


def test_an_entry_goes_with_its_key():
    cache = WeakIdentityKeyDict()
    code = code_of("model_a.py")
    cache[code] = [1]
    del code
    gc.collect()
    assert len(cache) == 0
