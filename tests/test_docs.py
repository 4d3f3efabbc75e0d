"""The README's generated rule graph must be the workflow's current one (regenerate: make docs)."""

import importlib.util

import pytest


@pytest.mark.workflow
def test_readme_rulegraph_is_current(repo):
    spec = importlib.util.spec_from_file_location("update_readme", repo / "docs" / "update_readme.py")
    update_readme = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(update_readme)
    readme = (repo / "README.md").read_text()
    shown = readme[readme.index(update_readme.RULEGRAPH_BEGIN):readme.index(update_readme.RULEGRAPH_END)]
    current = update_readme.rule_edges(update_readme.rulegraph())
    assert ("prepare_corpus", "train_model") in current and ("metrics_table", "all") in current
    assert update_readme.rule_edges(shown) == current, "README's rule graph is stale: run `make docs`"
