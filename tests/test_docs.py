"""The docs' generated rule graph must be the workflow's current one (regenerate: make docs)."""

import importlib.util

import pytest


@pytest.mark.workflow
def test_documented_rulegraph_is_current(repo):
    spec = importlib.util.spec_from_file_location("update_docs", repo / "docs" / "update_docs.py")
    update_docs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(update_docs)
    readme = (repo / "docs" / "dag.md").read_text()
    shown = readme[readme.index(update_docs.RULEGRAPH_BEGIN):readme.index(update_docs.RULEGRAPH_END)]
    current = update_docs.rule_edges(update_docs.rulegraph())
    assert ("prepare_corpus", "train_model") in current and ("metrics_table", "all") in current
    assert update_docs.rule_edges(shown) == current, "docs/dag.md's rule graph is stale: run `make docs`"
