"""The compiled-template cache: same page from the cache, recompiled after an edit, and a
directory that cannot be used is no cache rather than an error."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest

from rightsize.reports import template_cache
from rightsize.reports.template_cache import bytecode_cache, cache_root

SETTINGS = {"autoescape": True}


def env(templates: Path) -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(templates), autoescape=True,
                              bytecode_cache=bytecode_cache(SETTINGS))


def test_second_environment_loads_the_compiled_template(tmp_path, monkeypatch):
    monkeypatch.setenv("RIGHTSIZE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "t.j2").write_text("<p>{{ x }}</p>")
    assert env(tmp_path).get_template("t.j2").render(x="<b>") == "<p>&lt;b&gt;</p>"
    entries = list((tmp_path / "cache").rglob("*.cache"))
    assert len(entries) == 1

    def no_compile(*args, **kwargs):
        raise AssertionError("compiled again")

    second = env(tmp_path)
    monkeypatch.setattr(second, "compile", no_compile)
    assert second.get_template("t.j2").render(x="<b>") == "<p>&lt;b&gt;</p>"


def test_edited_template_is_recompiled(tmp_path, monkeypatch):
    monkeypatch.setenv("RIGHTSIZE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "t.j2").write_text("one {{ x }}")
    assert env(tmp_path).get_template("t.j2").render(x=1) == "one 1"
    (tmp_path / "t.j2").write_text("two {{ x }}")
    assert env(tmp_path).get_template("t.j2").render(x=1) == "two 1"


def test_other_settings_use_other_entries(tmp_path, monkeypatch):
    monkeypatch.setenv("RIGHTSIZE_CACHE_DIR", str(tmp_path))
    a = bytecode_cache({"autoescape": True})
    b = bytecode_cache({"autoescape": False})
    assert isinstance(a, jinja2.FileSystemBytecodeCache)
    assert isinstance(b, jinja2.FileSystemBytecodeCache)
    assert a.pattern != b.pattern


def test_empty_setting_turns_the_cache_off(monkeypatch):
    monkeypatch.setenv("RIGHTSIZE_CACHE_DIR", "")
    assert cache_root() is None
    assert bytecode_cache(SETTINGS) is None


def test_default_directory_follows_xdg(tmp_path, monkeypatch):
    monkeypatch.delenv("RIGHTSIZE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_root() == tmp_path / "rightsize"


def test_unusable_directory_is_no_cache(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("RIGHTSIZE_CACHE_DIR", str(blocker))
    assert bytecode_cache(SETTINGS) is None


def test_failed_store_still_renders(tmp_path, monkeypatch):
    monkeypatch.setenv("RIGHTSIZE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "t.j2").write_text("ok {{ x }}")
    e = env(tmp_path)
    cache = e.bytecode_cache
    assert isinstance(cache, template_cache.TolerantFileCache)
    cache.directory = str(tmp_path / "gone" / "away")  # removed after the environment was made
    assert e.get_template("t.j2").render(x=1) == "ok 1"


@pytest.mark.parametrize("name", ["report.html.j2"])
def test_report_page_same_with_and_without_cache(tmp_path, monkeypatch, name):
    from rightsize.reports.html import template_environment

    monkeypatch.setenv("RIGHTSIZE_CACHE_DIR", "")
    plain = template_environment("rightsize.reports").get_template(name)
    monkeypatch.setenv("RIGHTSIZE_CACHE_DIR", str(tmp_path))
    template_environment("rightsize.reports").get_template(name)  # fills the cache
    cached = template_environment("rightsize.reports").get_template(name)
    assert list(tmp_path.rglob("*.cache"))
    assert cached.root_render_func.__code__.co_code == plain.root_render_func.__code__.co_code
