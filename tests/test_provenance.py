"""The library params of a rule: which modules its script runs, and what counts as a change of their code."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from oversmooth.core.provenance import code_fingerprint, imported_modules, library_params, module_closure, module_file

SCRIPTS = Path(__file__).resolve().parents[1] / "workflow" / "scripts"
FIGURE_SCRIPTS = {"figure_4_2", "figure_4_3", "figure_5_1", "figure_token_heads", "figure_token_quality",
                  "figure_token_bottleneck", "position_figure", "training_figure", "figure_godey_anisotropy",
                  "figure_godey_rank_loss", "figure_loss_matched", "figure_support"}
BAT_MODULES = sorted(path.stem for path in module_file("oversmooth.analysis.bat").parent.glob("*.py")
                     if path.stem != "__init__")  # the BAT solver's modules: settings, polytope, screen, ...

MODULE = '''"""A module."""

import math


def area(r):
    """Of a circle."""
    return math.pi * r * r  # pi r squared
'''


def test_docstrings_comments_layout_and_the_version_do_not_count_but_code_does():
    reworded = MODULE.replace('"""Of a circle."""', '"""Of a disc."""').replace("# pi r squared", "# area")
    relaid = MODULE.replace("math.pi * r * r", "math.pi*r*r").replace('"""A module."""\n', "")
    assert code_fingerprint(reworded) == code_fingerprint(MODULE) == code_fingerprint(relaid)
    assert code_fingerprint(MODULE.replace("r * r", "r ** 2")) != code_fingerprint(MODULE)
    only_docstring = 'def f():\n    """Nothing but this."""\n'
    assert code_fingerprint('__version__ = "0.1.0"\nX = 1\n') == code_fingerprint('__version__ = "0.2.0"\nX = 1\n')
    assert code_fingerprint(only_docstring) == code_fingerprint('def f():\n    """Else."""\n')


def test_imports_are_found_at_any_depth_and_in_every_form():
    source = (
        "import numpy\nfrom oversmooth.analysis.metrics import describe\nfrom oversmooth.analysis import reference\n"
        "def f():\n    import oversmooth.analysis.tbat\n    from oversmooth.core.io import atomic_path\n"
    )
    assert imported_modules(source) == {"oversmooth.analysis", "oversmooth.analysis.metrics",
                                         "oversmooth.analysis.reference", "oversmooth.analysis.tbat",
                                         "oversmooth.core.io"}


def test_the_closure_follows_imports_through_the_library(repo):
    closure = module_closure((repo / "workflow" / "scripts" / "train_model.py").read_text())
    # the script imports oversmooth.models.train, which imports oversmooth.models.model: both count
    assert {"oversmooth.models.train", "oversmooth.models.model", "oversmooth.core.logs"} <= set(closure)
    # with the packages they lie in: importing a module runs its packages' __init__ first
    assert {"oversmooth", "oversmooth.models", "oversmooth.core"} <= set(closure)
    assert "oversmooth.generation.quality" not in closure and "oversmooth.analysis.tbat" not in closure
    assert module_closure("import numpy\n") == []


def test_each_module_is_its_own_param_named_in_its_value(repo):
    params = library_params(SCRIPTS / "tbat.py")
    assert params["code_analysis_tbat"].startswith("oversmooth.analysis.tbat ")
    assert params["code_analysis_bat_solver"].startswith("oversmooth.analysis.bat.solver ")  # a sub-package's module
    assert params["code_oversmooth"].startswith("oversmooth ")
    assert params["code_analysis"].startswith("oversmooth.analysis ")
    assert set(params) == {"code_script"} | {"code_" + ("_".join(m.split(".")[1:]) or "oversmooth")
                                             for m in module_closure((SCRIPTS / "tbat.py").read_text())}
    # a module shared by two scripts has the same value in both: only the modules that changed differ
    assert library_params(SCRIPTS / "quality.py")["code_core_io"] == params["code_core_io"]
    values = [v for s in ("train_model", "tbat", "quality") for v in library_params(SCRIPTS / f"{s}.py").values()]
    assert all(len(v.split()[1]) == 12 for v in values)


def test_a_script_s_own_code_is_a_param_named_by_its_path(tmp_path):
    """`code_script`: the script's path relative to the repository and the digest of its code, so that a script edit
    reruns its rule (Snakemake's `code` trigger, off in the workflow profile, followed the script's time)."""
    script = tmp_path / "workflow" / "scripts" / "table_x.py"
    script.parent.mkdir(parents=True)
    script.write_text('"""Snakemake adapter."""\n\nfrom oversmooth.core.io import write_csv\n\nX = 1  # one\n')
    params = library_params(script, root=tmp_path)
    path, digest = params["code_script"].split()
    assert path == "workflow/scripts/table_x.py" and len(digest) == 12
    assert params["code_core_io"].startswith("oversmooth.core.io ")
    script.write_text('"""Reworded."""\nfrom oversmooth.core.io import write_csv\nX = 1\n')
    assert library_params(script, root=tmp_path)["code_script"] == params["code_script"]
    script.write_text('"""Snakemake adapter."""\n\nfrom oversmooth.core.io import write_csv\n\nX = 2  # one\n')
    assert library_params(script, root=tmp_path)["code_script"] != params["code_script"]


def closure(script: str) -> set[str]:
    """The names of the modules (not the packages) a script reaches: `oversmooth.analysis.tbat` as `tbat`."""
    return {m.rpartition(".")[2] for m in module_closure((SCRIPTS / f"{script}.py").read_text())
            if module_file(m).name != "__init__.py"}


def scripts_running(module: str) -> set[str]:
    return {path.stem for path in SCRIPTS.glob("*.py") if module in closure(path.stem)}


@pytest.mark.parametrize("module", ["figures", "plotting"])
def test_plotting_code_is_run_by_figure_scripts_only(module):
    # not by the jobs that compute what a figure shows (a rank-constrained head's fit, a token head, anisotropy)
    assert scripts_running(module) == FIGURE_SCRIPTS


@pytest.mark.parametrize("module, scripts", [
    # the BAT solver (every module of oversmooth.analysis.bat): TBAT, and Table I.1's timings of it; TBAT's job side
    # (its positions, workers and table): the TBAT job alone
    # (and BA-epsilon and BA-eta: support recovery's, the metrics' decoded rows, TBAT after them, and the sample jobs
    # that run BAT sampling: a byte model's with BAT methods, a token head's BAT job; not a byte model's without BAT
    # methods, rule sample, nor a token head's direct sampling)
    *[(module, {"tbat", "time_metrics", "table_i_1", "sample_with_bat", "sample_bat", "support", "bat_decode"})
      for module in BAT_MODULES if module != "sampler"],
    # BAT sampling: the sampling and support jobs, the BA rows of the metrics and of TBAT after BA, not the teacher's
    # corpus, not the metrics or TBAT jobs, which read the decoded rows, and not the sampling without BAT methods
    ("sampler", {"sample_with_bat", "sample_bat", "support", "bat_decode"}),
    ("tbat", {"tbat"}),
    # the metrics' tables: the tables and the figures drawn from them, no metrics, TBAT or quality job, and no
    # sample-quality table or other figure (which would reach it through its byte frequencies)
    ("metrics_report", {"metrics_table", "loss_matched", "figure_4_2", "figure_4_3", "figure_loss_matched",
                        "figure_token_heads", "position_figure"}),
    # the byte frequencies beside a reference: Figures 4.3 and 5.1 (every figure script runs `figures`) and the
    # sample-quality tables
    ("frequencies", {"quality_table", "sample_table"} | FIGURE_SCRIPTS),
    ("quality_report", {"quality_table", "sample_table", "figure_5_1"}),
    ("report", {"table_3_1"}),
    # the metrics' formulas: the jobs that compute them (Table I.1 times them, Figure 4.1 titles its panels with
    # them) and the tables and figures of their summaries; not TBAT or sample quality, which only summarise
    # (a formula's edit would otherwise rerun them all), no sampler, token-track state or head, or Table B, and no
    # sample-quality table or figure of other numbers (quality_table, sample_table and training_figure
    # would reach it through `metrics_report`)
    ("metrics", {"oversmoothing_metrics", "time_metrics", "table_i_1", "metrics_table", "loss_matched",
                 "figure_4_2", "figure_4_3", "figure_loss_matched", "figure_token_heads", "position_figure"}),
    # the decoded rows' file (BA's, at a sample of positions): the job that writes them, TBAT and whatever reaches
    # the metrics, which read them
    ("decodedrows", {"bat_decode", "tbat", "oversmoothing_metrics", "time_metrics", "table_i_1", "metrics_table",
                     "loss_matched", "figure_4_2", "figure_4_3", "figure_loss_matched", "figure_token_heads",
                     "position_figure"}),
    # the summaries' statistics (mean, sd, cluster bootstrap): the jobs that summarise per-position values
    ("summary", {"oversmoothing_metrics", "tbat", "quality", "support"}),
    # support recovery's formulas: its jobs alone; its table module: the table and the findings (not the formulas)
    ("support", {"support"}),
    ("support_report", {"table_support", "findings", "token_findings"}),  # the findings module reads its curves
    # the token track: fitting a head, computing the source's states, comparing a head with the full head
    ("tokenfit", {"token_head"}),
    ("tokenstates", {"token_states"}),
    ("tokenmetrics", {"oversmoothing_metrics"}),
    ("headfit", {"rank_constrained_head", "token_head"}),
    # a teacher's language: sampling the teacher, scoring samples by it, the findings from the tables
    ("teacher", {"teacher_corpus"}),
    ("truth", {"quality"}),
    # a truth with known support: the decoding applied wherever the truth is read, and the truth's sampler
    ("decoded", {"teacher_corpus", "extract_logits", "evaluate_model", "sample", "sample_with_bat", "sample_direct",
                 "sample_bat", "quality"}),
    ("sampling", {"teacher_corpus", "sample", "sample_with_bat", "sample_direct", "sample_bat"}),
    # the sample jobs' side (prompts in, seeds, Parquet out): the sample jobs alone, not the teacher's corpus, whose
    # rerun would rewrite the teacher's language and everything trained on it
    ("samples", {"sample", "sample_with_bat", "sample_direct", "sample_bat"}),
    # the samples' table and its join: the sample jobs and the join, no quality job (it reads the files)
    ("sampletable", {"sample", "sample_with_bat", "sample_direct", "sample_bat", "join_samples"}),
    # a token head's sampling job: the token track's two sample rules, not the byte models' (sample, sample_with_bat)
    ("tokensampling", {"sample_direct", "sample_bat"}),
    # a byte model's sampling job: the byte track's two sample rules, not the token track's
    ("bytesampling", {"sample", "sample_with_bat"}),
    ("findings", {"findings", "token_findings"}),
])
def test_analysis_code_is_run_by_the_scripts_that_use_it_only(module, scripts):
    assert scripts_running(module) == scripts


def test_analysis_jobs_do_not_run_plotting_training_or_corpus_code():
    for script in ("oversmoothing_metrics", "tbat", "quality", "metrics_table", "time_metrics", "quality_table"):
        assert not closure(script) & {"report", "figures", "train", "corpus", "sampling", "evaluate"}, script
    # the byte track's tables and timings load no model of the token track or the corpus; quality loads, on a
    # teacher's language, the truth as any byte LM (a token teacher through `tokenmarginal`), and nothing else
    for script in ("time_metrics", "metrics_table", "quality_table", "table_i_1", "findings"):
        assert not closure(script) & {"plotting", "bytelm", "tokenmarginal", "logits", "headfit", "tokenheads"}, script
    assert not closure("quality") & {"plotting", "logits", "headfit", "tokenheads", "tokenfit", "sampling", "teacher"}
    # the jobs that read or sample a rank-k head (both tracks) do not run the code that fits or draws one
    for script in ("oversmoothing_metrics", "tbat", "sample", "sample_with_bat", "sample_direct", "sample_bat",
                   "unargmaxable", "table_b"):
        assert not closure(script) & {"headfit", "tokenfit", "tokenstates", "rank", "plotting", "train"}, script
    # the token track's heads on a frozen pretrained LM do not depend on this pipeline's training code
    assert not closure("token_head") & {"train", "corpus", "cluster"}
    # a byte model's sampling runs no token-track code, a token head's direct sampling and a byte model's without BAT
    # methods no BAT code: an edit to either reruns the other's sample jobs no more
    for script in ("sample", "sample_with_bat"):
        assert not closure(script) & {"tokenheads", "tokensource", "tokensampling", "causallm", "lowrank"}, script
    for script in ("sample", "sample_direct"):
        assert not closure(script) & {*BAT_MODULES, "tbat"}, script


# the CPU analysis jobs (the byte track's metrics, TBAT and timings: a token-track head's jobs import torch in their
# own branch, to run the head) and the table and figure jobs: torch costs each ~1 CPU-s to import
TORCH_FREE_SCRIPTS = FIGURE_SCRIPTS | {
    "metrics_table", "quality_table", "sample_table", "table_3_1", "loss_matched", "table_7_3", "table_godey_anisotropy",
    "table_i_1", "table_b", "findings", "token_findings", "oversmoothing_metrics", "tbat", "time_metrics", "support",
    "table_support", "bat_decode", "join_samples"}


def script_imports(path: Path, nested: bool = False) -> str:
    """The top-level import statements of a workflow script, what its job imports before any work (`nested`: those
    in its branches too)."""
    source = path.read_text()
    nodes = ast.walk(ast.parse(source)) if nested else ast.parse(source).body
    return "\n".join(ast.get_source_segment(source, node).strip() for node in nodes
                     if isinstance(node, (ast.Import, ast.ImportFrom)))


@pytest.mark.parametrize("script", sorted(TORCH_FREE_SCRIPTS))
def test_analysis_table_and_figure_jobs_do_not_import_torch(script):
    imports = script_imports(SCRIPTS / f"{script}.py")
    probe = f"{imports}\nimport sys\nprint(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.strip() == "[]", f"{script} imports {result.stdout.strip()}"


ANALYSIS_WITHOUT_TORCH = """
import sys
import numpy as np
from oversmooth.analysis.decoding import decodings_from_config
from oversmooth.analysis.metrics import PositionChunk, write_position_metrics
from oversmooth.analysis.bat.settings import TBATSettings
from oversmooth.analysis.tbat import model_tbat
from oversmooth.analysis.timing import model_timings
from oversmooth.extraction.logit_tables import SampledRows
from oversmooth.models.torchfile import read_output_matrix

out, checkpoint = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(0)
logp = np.log(rng.dirichlet(np.full(256, 0.3), size=(2, 12)))
decodings = decodings_from_config({"methods": ["pure", "greedy", "top_k", "top_p", "temperature"], "top_k": 5,
                                   "top_p": 0.9, "temperature": 0.8})
ids = np.arange(12)
write_position_metrics([PositionChunk(ids, ids, ids, logp[0], logp[1])], out + "/m.parquet", decodings, 0.9, 1e-6)
W = read_output_matrix(checkpoint)
model_tbat(W, SampledRows(ids[:3], ids[:3], logp[0, :3]), out + "/t.parquet", decodings[:2], TBATSettings())
model_timings(W, logp[0], logp[1], tau=0.9, tbat=TBATSettings(), reference_positions=2, tbat_reference_positions=1,
              repeats=2)
print(sorted(m for m in ("torch", "transformers") if m in sys.modules))
"""


def test_the_byte_track_s_metrics_tbat_and_timings_run_without_torch(tmp_path):
    """Not only the scripts' imports: the library calls of those jobs, run in a fresh Python, load no torch (a lazy
    `import torch` in a function they call would)."""
    from oversmooth.models.checkpoints import save_torch
    from oversmooth.models.model import GPT, GPTConfig

    model = GPT(GPTConfig(block_size=8, n_layer=1, n_head=1, n_embd=16, bottleneck=4))
    save_torch({"model_config": model.config.to_dict(), "model": model.state_dict()}, tmp_path / "best.pt")
    result = subprocess.run([sys.executable, "-c", ANALYSIS_WITHOUT_TORCH, str(tmp_path), str(tmp_path / "best.pt")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"
    assert (tmp_path / "m.parquet").exists() and (tmp_path / "t.parquet").exists()


def test_every_workflow_script_imports_what_it_names():
    """A moved library function breaks its scripts only when their job runs; import them all here, in one Python."""
    imports = [script_imports(path, nested=True) for path in sorted(SCRIPTS.glob("*.py"))]
    subprocess.run([sys.executable, "-c", "\n".join(imports)], capture_output=True, text=True, timeout=300, check=True)
