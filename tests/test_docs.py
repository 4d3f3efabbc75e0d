"""The docs: the generated rule graph is the workflow's current one (regenerate: make docs), and they name no commit."""

import importlib.util
import re

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


COMMIT_HASH = re.compile(r"\b(?=[0-9a-f]{7,40}\b)(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]+\b")


def test_a_commit_hash_in_text_is_found():
    assert COMMIT_HASH.findall("measured at 7f62ba7, 1e-9 and 1000000 and feedbac and a 64-hex " + "ab12" * 16) == [
        "7f62ba7"]


def test_docs_and_readme_name_no_commit_hash(repo):
    """The docs describe the present: history, with its commits, is in CHANGELOG.md and git log."""
    pages = [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]
    found = {page.name: COMMIT_HASH.findall(page.read_text()) for page in pages}
    assert not {name: hashes for name, hashes in found.items() if hashes}
