"""A release a paper can cite: one version everywhere, a citation naming the thesis and its papers, a changelog
entry for the version."""

import re
import tomllib

import yaml
from workflow_helpers import REPO

import oversmooth


def test_the_version_is_the_same_in_the_package_pyproject_and_the_citation():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert oversmooth.__version__ == pyproject == str(citation["version"])
    assert re.fullmatch(r"\d+\.\d+\.\d+", oversmooth.__version__)


def test_the_citation_names_the_thesis_and_the_papers_it_builds_on():
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["message"] and citation["authors"]
    titles = {ref["title"]: ref for ref in citation["references"]}
    thesis = titles["How does the Softmax Bottleneck affect LLM Generation?"]
    assert thesis["type"] == "thesis" and thesis["authors"] == [{"family-names": "Ward", "given-names": "James"}]
    for words in ("Neural Text Degeneration", "Unargmaxable Classes", "Breaking the Softmax Bottleneck",
                  "LM saturation", "MAUVE"):
        assert any(words in title for title in titles), words
    assert all(ref["year"] and ref["authors"] for ref in citation["references"])


def test_the_changelog_has_an_entry_for_this_version_saying_what_reruns():
    changelog = (REPO / "CHANGELOG.md").read_text()
    entries = re.findall(r"^## (\d+\.\d+\.\d+) \((\d{4}-\d{2}-\d{2})\)", changelog, flags=re.M)
    assert entries and entries[0][0] == oversmooth.__version__  # the newest first
    newest = changelog.split("\n## ")[1]
    assert re.search(r"^Upgrading from \d+\.\d+\.\d+: ", newest, flags=re.M)  # what reruns in a finished run
