"""The library digest of a rule: which modules its script runs, and what counts as a change of their code."""

from oversmooth.provenance import code_fingerprint, imported_modules, library_digest, module_closure

MODULE = '''"""A module."""

import math


def area(r):
    """Of a circle."""
    return math.pi * r * r  # pi r squared
'''


def test_docstrings_comments_and_layout_do_not_count_but_code_does():
    reworded = MODULE.replace('"""Of a circle."""', '"""Of a disc."""').replace("# pi r squared", "# area")
    relaid = MODULE.replace("math.pi * r * r", "math.pi*r*r").replace('"""A module."""\n', "")
    assert code_fingerprint(reworded) == code_fingerprint(MODULE) == code_fingerprint(relaid)
    assert code_fingerprint(MODULE.replace("r * r", "r ** 2")) != code_fingerprint(MODULE)
    only_docstring = 'def f():\n    """Nothing but this."""\n'
    assert code_fingerprint(only_docstring) == code_fingerprint('def f():\n    """Else."""\n')


def test_imports_are_found_at_any_depth_and_in_every_form():
    source = (
        "import numpy\nfrom oversmooth.metrics import describe\nfrom oversmooth import reference\n"
        "def f():\n    import oversmooth.tbat\n    from oversmooth.io import atomic_path\n"
    )
    assert imported_modules(source) == {"oversmooth", "oversmooth.metrics", "oversmooth.reference",
                                         "oversmooth.tbat", "oversmooth.io"}


def test_the_closure_follows_imports_through_the_library(repo):
    closure = module_closure((repo / "workflow" / "scripts" / "train_model.py").read_text())
    # the script imports oversmooth.train, which imports oversmooth.model: both count
    assert {"oversmooth.train", "oversmooth.model", "oversmooth.logs", "oversmooth"} <= set(closure)
    assert "oversmooth.quality" not in closure and "oversmooth.tbat" not in closure
    assert module_closure("import numpy\n") == []


def test_scripts_that_run_different_code_have_different_digests(repo):
    scripts = repo / "workflow" / "scripts"
    digests = {name: library_digest(scripts / f"{name}.py") for name in ("train_model", "tbat", "quality")}
    assert len(set(digests.values())) == 3 and all(len(d) == 16 for d in digests.values())
    assert library_digest(scripts / "tbat.py") == digests["tbat"]
