"""kvplan.io.distributions.installed_version answers what importlib.metadata.version answers
(the oracle: the standard library's own reader), for the layouts a sys.path can hold."""

from __future__ import annotations

import importlib
import sys
import zipfile
from importlib import metadata

import pytest

from kvplan.io.distributions import installed_version


def _oracle(name: str):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _dist_info(root, dirname: str, metadata_text: str | None) -> None:
    info = root / dirname
    info.mkdir(parents=True)
    if metadata_text is not None:
        (info / "METADATA").write_text(metadata_text, encoding="utf-8")


@pytest.fixture
def path(tmp_path, monkeypatch):
    """A sys.path of two fresh directories (a, then b) ahead of the real one."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    monkeypatch.syspath_prepend(str(b))
    monkeypatch.syspath_prepend(str(a))
    importlib.invalidate_caches()
    return a, b


NAME = "kvplan-fake-dist"  # a name no machine has installed


def test_a_dist_info_directory(path):
    a, _ = path
    _dist_info(a, "kvplan_fake_dist-1.2.3.dist-info", "Metadata-Version: 2.1\nName: kvplan-fake-dist\nVersion: 1.2.3\n\nbody\nVersion: 9\n")
    assert installed_version(NAME) == _oracle(NAME) == "1.2.3"


def test_name_spellings_normalise_as_pep_503(path):
    a, _ = path
    _dist_info(a, "KVPLAN.Fake_Dist-0.5.dist-info", "Name: KVPLAN.Fake_Dist\nVersion: 0.5+local\n")
    for spelling in (NAME, "kvplan_fake_dist", "KVPlan.Fake-Dist"):
        assert installed_version(spelling) == _oracle(spelling) == "0.5+local"


def test_the_first_entry_of_sys_path_wins(path):
    a, b = path
    _dist_info(b, "kvplan_fake_dist-2.0.dist-info", "Name: kvplan-fake-dist\nVersion: 2.0\n")
    assert installed_version(NAME) == _oracle(NAME) == "2.0"
    _dist_info(a, "kvplan_fake_dist-1.0.dist-info", "Name: kvplan-fake-dist\nVersion: 1.0\n")
    importlib.invalidate_caches()
    assert installed_version(NAME) == _oracle(NAME) == "1.0"


def test_an_egg_info_directory_and_a_missing_distribution(path):
    a, _ = path
    assert installed_version(NAME) is None and _oracle(NAME) is None
    info = a / "kvplan_fake_dist-3.1.egg-info"
    info.mkdir()
    (info / "PKG-INFO").write_text("Metadata-Version: 1.0\nName: kvplan-fake-dist\nVersion: 3.1\n", encoding="utf-8")
    importlib.invalidate_caches()
    assert installed_version(NAME) == _oracle(NAME) == "3.1"


def test_layouts_it_does_not_read_itself_are_left_to_importlib_metadata(path, tmp_path, monkeypatch):
    a, _ = path
    # an egg-info FILE (old distutils) and a dist-info without METADATA
    (a / "kvplan_fake_dist-4.0.egg-info").write_text("Name: kvplan-fake-dist\nVersion: 4.0\n", encoding="utf-8")
    importlib.invalidate_caches()
    assert installed_version(NAME) == _oracle(NAME) == "4.0"
    (a / "kvplan_fake_dist-4.0.egg-info").unlink()
    _dist_info(a, "kvplan_fake_dist-5.0.dist-info", None)
    importlib.invalidate_caches()
    assert installed_version(NAME) == _oracle(NAME)
    # a zip archive on sys.path
    archive = tmp_path / "dists.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("kvplan_zip_dist-6.0.dist-info/METADATA", "Name: kvplan-zip-dist\nVersion: 6.0\n")
    monkeypatch.syspath_prepend(str(archive))
    importlib.invalidate_caches()
    assert installed_version("kvplan-zip-dist") == _oracle("kvplan-zip-dist") == "6.0"


def test_reads_no_importlib_metadata_for_a_plain_site_packages(path):
    a, _ = path
    _dist_info(a, "kvplan_fake_dist-7.0.dist-info", "Name: kvplan-fake-dist\nVersion: 7.0\n")
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "from kvplan.io.distributions import installed_version\n"
        "print(installed_version(%r), installed_version('kvplan-no-such-dist'), 'importlib.metadata' in sys.modules)"
    ) % (str(a), NAME)
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["7.0", "None", "False"]
