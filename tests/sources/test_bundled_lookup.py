"""Bundled snapshot lookup (kvplan.sources.bundled): a repo id is found by its file name without
reading every snapshot (start-up, issue 22 item 5), and the answer is the full index's."""

from __future__ import annotations

import json

import pytest

from kvplan.sources import bundled


def _snapshots() -> list[tuple[str, dict]]:
    return [(p.name, json.loads(p.read_text(encoding="utf-8"))) for p in sorted(bundled._spec_dir().glob("*.json"))]


def test_every_snapshot_is_named_after_its_repo_id_and_no_alias_is_another_repo_id():
    # what the file-name path relies on (otherwise the index could answer differently)
    snaps = _snapshots()
    ids = [d["repo_id"].lower() for _, d in snaps]
    assert len(ids) == len(set(ids))
    for name, data in snaps:
        assert name == data["repo_id"].replace("/", "__") + ".json"
        assert not any(a.lower() in ids and a.lower() != data["repo_id"].lower() for a in data.get("aliases", []))


@pytest.mark.parametrize("spelling", ["meta-llama/Meta-Llama-3-8B", "META-LLAMA/meta-llama-3-8b", " meta-llama/Meta-Llama-3-8B "])
def test_a_repo_id_in_any_case_is_found_by_its_file_name(spelling, monkeypatch):
    def no_index():
        raise AssertionError("the full index was read")

    monkeypatch.setattr(bundled, "_index", no_index)
    src = bundled.find_bundled(spelling)
    assert src is not None and src.name == "meta-llama/Meta-Llama-3-8B"
    assert src.provenance["bundled_file"] == "model_specs/meta-llama__Meta-Llama-3-8B.json"


def test_the_file_name_path_agrees_with_the_index_for_every_id_and_alias():
    for name, data in _snapshots():
        for key in [data["repo_id"], *data.get("aliases", [])]:
            src = bundled.find_bundled(key)
            assert src is not None and src.provenance["bundled_file"] == f"model_specs/{bundled._index()[key.lower()]}"
            assert src.name == data["repo_id"], key


def test_unknown_names_are_none():
    for key in ["meta-llama/No-Such-Model", "no-slash", "a/b/c", "meta-llama__Meta-Llama-3-8B", ""]:
        assert bundled.find_bundled(key) is None
