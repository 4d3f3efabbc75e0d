"""Shared fixtures: the repository root, small corpora written to temporary folders, one smoke run of the DAG."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch
from _pytest.nodeid import NodeId
from slurm_cluster import LocalSlurm, missing_requirements, one_cluster_at_a_time
from workflow_helpers import made_once, snakemake

from oversmooth.data.prompts import PROMPTS_SCHEMA

REPO = Path(__file__).resolve().parents[1]


SMOKE_GROUP, SMOKE_READERS = "smoke-run", "smoke-run-readers"
# Run after every other test of their group: the SLURM dispatch, whose cluster the drill (tests/test_slurm_drill.py,
# on the other worker) holds first, so that neither waits for the other.
LAST_FILES = ("test_slurm.py",)


def xdist_group(item: pytest.Item) -> str:
    """The pytest-xdist group of a test (`make test` runs two workers, `--dist loadgroup`): the tests that need the
    smoke run in one group, since several run Snakemake in its folder or copy it, and those marked `reads_smoke_run`
    (they read files that no test changes) in a second, which may run on the other worker once the run is made; any
    other test with the tests of its file, so that a module's fixture is made once."""
    if "smoke_run" not in item.fixturenames:
        return item.path.name
    return SMOKE_READERS if item.get_closest_marker("reads_smoke_run") else SMOKE_GROUP


ONE_THREAD = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def pytest_configure(config):
    """Under xdist, before its workers start: each worker computes on one thread (its NumPy, SciPy and torch read
    these at import), so that two workers fill two cores without oversubscribing them. A Snakemake job that a test
    starts gets its rule's threads from Snakemake, whatever these say."""
    if config.getoption("numprocesses", default=None) and not hasattr(config, "workerinput"):
        for name in ONE_THREAD:
            os.environ[name] = "1"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Each test's xdist group, as `--dist loadgroup` reads it: a `@<group>` suffix of its node id. xdist 3.8 writes
    the suffix of an `xdist_group` mark into `item._nodeid`, which pytest 9 no longer reads (a node's id is its
    `_id`), so the groups are set here, after xdist's own hook. The tests of LAST_FILES go last, in any run."""
    items.sort(key=lambda item: item.path.name in LAST_FILES)  # stable: the order within each part is kept
    if not config.getoption("loadgroup", default=False):  # set in an xdist worker under `--dist loadgroup`
        return
    for item in items:
        if "@" not in item.nodeid.rpartition("]")[2]:
            item._id = NodeId.parse(f"{item.nodeid}@{xdist_group(item)}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A one-node SLURM on localhost for a module's tests (tests/slurm_cluster.py), held against any other: a
    machine holds one (a fixed slurm.conf and ports), so a second module or worker waits for the first to stop it."""
    reason = missing_requirements()
    if reason:
        if os.environ.get("OVERSMOOTH_REQUIRE_SLURM") == "1":
            pytest.fail(f"OVERSMOOTH_REQUIRE_SLURM=1 but a local SLURM cannot be started: {reason}")
        pytest.skip(f"no local SLURM: {reason}")
    with one_cluster_at_a_time():
        slurm = LocalSlurm(tmp_path_factory.mktemp("slurm"))
        try:
            yield slurm.start()
        finally:
            slurm.stop()


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """One local run of the whole smoke DAG, shared by the workflow tests: (repo, workdir, dry-run output). Under
    xdist the first worker to need it makes it and the other, where the readers' group runs, waits for it and reads
    the same folder."""

    def make() -> dict:
        workdir = tmp_path_factory.mktemp("smoke")
        dry = snakemake(workdir, "-n", "all")
        snakemake(workdir, "all", timeout=2700)  # a hang guard: 1,110 s on the slower machine beside the other worker
        return {"workdir": str(workdir), "dry_run": dry.stdout + dry.stderr}

    if os.environ.get("PYTEST_XDIST_WORKER"):  # the workers' folders share their session's folder
        run = made_once(tmp_path_factory.getbasetemp().parent, "smoke-run", make, timeout_s=3600)
    else:
        run = make()
    return REPO, Path(run["workdir"]), run["dry_run"]


@pytest.fixture
def in_a_run(tmp_path, monkeypatch) -> Path:
    """A job's view of a run made in `runs/r` of a repository at `tmp_path` (`--directory runs/r --cores 2
    --configfile config/x.yaml`): its folder as the working directory, the run's record in the environment, as the
    Snakefile leaves them. Returns the repository."""
    from oversmooth.core.recovery import RUN_VARIABLE, run_options, run_record

    folder = tmp_path / "runs" / "r"
    folder.mkdir(parents=True)
    monkeypatch.chdir(folder)
    options = run_options(tmp_path, folder, configfiles=[tmp_path / "config" / "x.yaml"], cores=2)
    monkeypatch.setenv(RUN_VARIABLE, run_record(tmp_path, options))
    return tmp_path


RUN_OPTIONS = "--directory runs/r --cores 2 --configfile config/x.yaml"  # what `in_a_run`'s commands end with


TOKEN_LM_CORPUS = ["the cat sat on the mat. ", "the hat is on the cat. ", "a caté, then tea. ", "that is that. "] * 50


@pytest.fixture(scope="session")
def tiny_token_lm(tmp_path_factory):
    """The folder of a saved byte-level BPE tokenizer (256 bytes + merges, no special token but BOS) and a random
    Llama: a token-level LM small enough for brute force over tokenisations."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("tiny_token_lm")
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(TOKEN_LM_CORPUS, vocab_size=300, min_frequency=2, special_tokens=["<s>"], show_progress=False)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>")
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         bos_token_id=tokenizer.bos_token_id)
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # sharper than a fresh init, so that tokenisations differ a lot in probability
        model.lm_head.weight.mul_(8.0)
    model.save_pretrained(folder)
    return folder


def write_docs(folder: Path, docs: dict[str, bytes | str]) -> Path:
    """Write one file per document into `folder`; return the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        data = text.encode() if isinstance(text, str) else text
        (folder / name).write_bytes(data)
    return folder


def sentences(doc: int, n: int) -> str:
    """A document of `n` distinct sentences, easy to recognise in assertions."""
    return " ".join(f"Document {doc} says sentence number {i} is here." for i in range(n))


def prompts_table(n, context_len, window_len, seed=0):
    """`n` prompts of random printable bytes: a context and a window (also the sampling prefix)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        text = bytes(rng.integers(32, 127, size=context_len + window_len, dtype=np.uint8))
        rows.append(
            {"prompt_id": i, "doc_id": f"d{i}", "source": "test", "offset": context_len,
             "context": text[:context_len], "window": text[context_len:], "sample_prefix": text[context_len:],
             "human_continuation": b""}
        )
    return pa.Table.from_pylist(rows, schema=PROMPTS_SCHEMA)
