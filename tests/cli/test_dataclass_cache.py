"""The compiled-dataclass cache: the same classes with and without it, nothing compiled again
once warm, an edited module's file rewritten with exactly its current methods, other
libraries' classes untouched, a bad or unwritable directory just no cache."""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
from pathlib import Path

from rightsize import dataclass_cache
from rightsize.dataclass_cache import CodeCache, compiled_dataclasses, version_tag

# Every rightsize dataclass these modules define: methods' code, names, defaults, slots, params.
FINGERPRINT = r"""
import dataclasses, json, re, sys
from rightsize.dataclass_cache import compiled_dataclasses
MODULES = ["rightsize.analyzers.analysis", "rightsize.analyzers.document.build",
           "rightsize.reports.render", "rightsize.reports.html", "rightsize.pipeline",
           "rightsize.traces.loader", "rightsize.catalog", "rightsize.analyzers.sizing.estimator"]
def r(x):  # repr without the addresses that differ between processes
    return re.sub(" at 0x[0-9a-f]+", "", repr(x))
def code(c):
    consts = [code(k) if hasattr(k, "co_code") else r(k) for k in c.co_consts]
    return [c.co_code.hex(), consts, c.co_names, c.co_varnames, c.co_freevars, c.co_cellvars,
            c.co_flags, c.co_filename, c.co_name, c.co_qualname, c.co_firstlineno,
            c.co_linetable.hex(), c.co_exceptiontable.hex(), c.co_argcount,
            c.co_kwonlyargcount, c.co_posonlyargcount, c.co_stacksize]
def method(f):
    f = getattr(f, "__wrapped__", f)  # __repr__ is wrapped by reprlib's recursion guard
    if not hasattr(f, "__code__"):
        return r(f)
    return [code(f.__code__), f.__qualname__, f.__module__, r(f.__defaults__),
            r(f.__kwdefaults__), r(f.__annotations__), f.__doc__]
with compiled_dataclasses() as cache:
    for m in MODULES:
        __import__(m)
    missed = sorted(cache.missed) if cache else None  # before the block saves and clears
out = {}
for name, mod in sorted(sys.modules.items()):
    if not name.startswith("rightsize."):
        continue
    for cls in vars(mod).values():
        if (not isinstance(cls, type) or cls.__module__ != name
                or not dataclasses.is_dataclass(cls)):
            continue
        out[f"{name}.{cls.__qualname__}"] = {
            "params": r(cls.__dataclass_params__),
            "fields": [(f.name, r(f.type), r(f.default), r(f.default_factory))
                       for f in dataclasses.fields(cls)],
            "slots": list(getattr(cls, "__slots__", ())), "doc": cls.__doc__,
            "match": list(getattr(cls, "__match_args__", ())),
            "methods": {k: method(v) for k, v in sorted(vars(cls).items())
                        if k.startswith("__") and callable(v)},
        }
print(json.dumps({"classes": out, "missed": missed,
                  "used": sorted(cache.used) if cache else []}))
"""


def fingerprint(cache_dir: str) -> dict:
    env = dict(os.environ, RIGHTSIZE_CACHE_DIR=cache_dir)
    res = subprocess.run([sys.executable, "-c", FINGERPRINT], env=env, capture_output=True,
                         text=True, check=True, timeout=120)
    return json.loads(res.stdout)


def test_classes_identical_without_cold_and_warm_cache(tmp_path):
    plain = fingerprint("")
    cold = fingerprint(str(tmp_path))
    files = sorted(p.name for p in tmp_path.rglob("*.marshal"))
    warm = fingerprint(str(tmp_path))
    assert len(plain["classes"]) >= 100
    assert cold["classes"] == plain["classes"]
    assert warm["classes"] == plain["classes"]
    assert plain["used"] == [] and plain["missed"] is None  # off: nothing went through it
    assert cold["missed"] == cold["used"]
    assert warm["missed"] == []  # warm: not one method compiled again
    assert files == sorted(f"{m}.marshal" for m in cold["used"])
    assert "rightsize.analyzers.document.metrics.marshal" in files
    assert all(m.startswith("rightsize.") for m in cold["used"])


def test_warm_cache_compiles_nothing(tmp_path, monkeypatch):
    module = {"__name__": "rightsize.fake"}
    source = "def __create_fn__():\n def f(self):\n  return 1\n return f"
    first = CodeCache(tmp_path)
    first.exec(source, module, ns := {})
    assert ns["__create_fn__"]()(None) == 1
    assert first.missed == {"rightsize.fake"}
    first.save()
    assert first.missed == set()

    def no_compile(*args, **kwargs):
        raise AssertionError("compiled again")

    monkeypatch.setattr(dataclass_cache, "compile", no_compile, raising=False)
    second = CodeCache(tmp_path)
    second.exec(source, module, ns := {})
    assert ns["__create_fn__"]()(None) == 1
    assert second.missed == set()


def test_edited_module_keeps_only_its_current_sources(tmp_path):
    module = {"__name__": "rightsize.fake"}
    old = "def __create_fn__():\n def f(self):\n  return 'old'\n return f"
    new = "def __create_fn__():\n def f(self):\n  return 'new'\n return f"
    keep = "def __create_fn__():\n def g(self):\n  return 'kept'\n return g"
    cache = CodeCache(tmp_path)
    for source in (old, keep):
        cache.exec(source, module, {})
    cache.save()
    edited = CodeCache(tmp_path)
    for source in (new, keep):
        edited.exec(source, module, {})
    assert edited.missed == {"rightsize.fake"}
    edited.save()
    stored = marshal.loads((tmp_path / "rightsize.fake.marshal").read_bytes())
    assert sorted(stored) == sorted([new, keep])


def test_other_modules_are_not_cached(tmp_path):
    cache = CodeCache(tmp_path)
    ns: dict = {}
    cache.exec("x = 1", {"__name__": "polars.thing"}, ns)
    cache.exec("y = 2", {"__name__": "rightsize_other"}, ns)  # a prefix, not the package
    assert ns == {"x": 1, "y": 2}
    assert cache.used == {} and cache.missed == set()
    cache.save()
    assert list(tmp_path.iterdir()) == []


def test_corrupt_file_is_no_cache(tmp_path):
    (tmp_path / "rightsize.fake.marshal").write_bytes(b"\x00not marshal")
    cache = CodeCache(tmp_path)
    ns: dict = {}
    cache.exec("z = 3", {"__name__": "rightsize.fake"}, ns)
    assert ns["z"] == 3
    assert cache.missed == {"rightsize.fake"}
    cache.save()  # replaced by a good one
    assert list(marshal.loads((tmp_path / "rightsize.fake.marshal").read_bytes())) == ["z = 3"]


def test_unwritable_directory_still_works(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("RIGHTSIZE_CACHE_DIR", str(blocker))
    with compiled_dataclasses() as cache:
        ns: dict = {}
        assert cache is not None
        cache.exec("w = 4", {"__name__": "rightsize.fake"}, ns)
    assert ns["w"] == 4
    assert blocker.read_text() == "not a directory"


def test_block_restores_dataclasses_and_turns_off(tmp_path, monkeypatch):
    import dataclasses

    monkeypatch.setenv("RIGHTSIZE_CACHE_DIR", str(tmp_path))
    with compiled_dataclasses() as outer:
        assert outer is not None and vars(dataclasses)["exec"] == outer.exec
        with compiled_dataclasses() as inner:
            assert inner is None  # the outer block's cache stays in place
        assert vars(dataclasses)["exec"] == outer.exec
    assert "exec" not in vars(dataclasses)
    monkeypatch.setenv("RIGHTSIZE_CACHE_DIR", "")
    with compiled_dataclasses() as off:
        assert off is None and "exec" not in vars(dataclasses)


def test_directory_names_the_interpreter():
    tag = version_tag()
    assert tag.startswith(sys.implementation.cache_tag + "-")
    assert tag.endswith(f"-O{sys.flags.optimize}")
    assert Path(tag).name == tag
