"""A compute plan before submitting: per rule family, the jobs of a config's DAG, GPU-hours on a named GPU,
CPU-hours and disk.

    python -m oversmooth.workflow.plan --configfile config/thesis.yaml [--gpu a100 --mfu 0.3]     (make plan)
    python -m oversmooth.workflow.plan --configfile config/config.yaml --benchmarks results/benchmarks

The jobs are Snakemake's own (`snakemake -n -F all` on the config). Each job's cost comes from its config:
- model passes (training, evaluation, logits, sampling, cached states, heads) as FLOPs: 6 N per trained token plus
  attention (nanoGPT's estimate), a third of that per token of inference; on a GPU at `mfu` of its bf16 peak (decoding
  one token at a time at `decode_mfu`), without a GPU at `cpu_flops` per core;
- a token-level ground truth's byte marginals by the measured seconds per byte position of its beam search;
- the CPU analyses (metrics, TBAT, quality, ...) by seconds per unit (positions x decoding methods, samples, ...)
  measured on the project's machine (one core), plus every job's start-up (Python, torch, Snakemake).
With --benchmarks, each family's estimate sits beside the measured job time of a finished run (Snakemake's
benchmark files): the ratio says how far to trust the plan. The dry run is the SLURM profile's (profiles/slurm): its
job groups give the submissions beside the jobs (oversmooth.workflow.submissions).
"""

from __future__ import annotations

import argparse
import functools
import math
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from oversmooth.core.catalog import (
    bottleneck_of,
    byte_bat_methods,
    byte_sampling_methods,
    checkpoint_parts,
    ground_truth,
    is_token_model,
    segment_ends,
    svd_source,
    token_head_parts,
    token_measured_methods,
    token_methods,
    token_rank,
    training_settings,
)
from oversmooth.analysis.decoding import HEAD_METHODS
from oversmooth.core.cluster import TOKEN_BAT_SAMPLING_S, rate_around, token_bat_sampling_seconds
from oversmooth.workflow.config import load_config
from oversmooth.workflow.outputs import token_tbat_methods, token_tbat_positions
from oversmooth.workflow.source import workflow_folder
from oversmooth.workflow.submissions import (
    PROFILE,
    Submissions,
    count_submissions,
    local_rules,
    submission_table,
)

# bf16 dense peak FLOP/s per GPU (vendor data sheets; SXM parts)
GPU_PEAK = {"a100": 312e12, "h100": 989e12, "h200": 989e12, "l40s": 362e12, "v100": 125e12}
BYTES_PER_FLOAT = 4
SMOLLM2_PARAMETERS, SMOLLM2_WIDTH, SMOLLM2_VOCAB = 134_515_008, 576, 49_152


@dataclass(frozen=True)
class Costs:
    """Costs on one core of the project's machine (2-core x86, no GPU), fitted on the demo's measured job times
    (`make demo`'s results/benchmarks; the ratios per family are in docs/cluster.md)."""

    cpu_flops: float = 7.0e10  # what a training step achieves on one core
    startup_s: float = 2.0  # a job script's imports (within Snakemake's benchmark)
    snakemake_startup_s: float = 2.5  # a job step's Snakemake reading the workflow (`snakemake --list-rules` on the
    # thesis config: 2.5 s of CPU), before its job's script starts
    marginal_s_per_position: float = 0.018  # gt-smollm2's beam search per byte position, one core
    marginal_gpu_speedup: float = 20.0  # the same search with the LM on a GPU (batched LM calls): an assumption
    metrics_s_per_position: float = 4.0e-5  # per decoding method at 256 bytes; x (V / 256)^0.8 for larger V
    tbat_s_per_position: float = 1.6e-3  # per decoding method at k = 4, byte track; grows ~ k^0.5
    bat_decode_s_per_position: float = 0.03  # per BA method (a whole reject set) at k = 4; grows ~ k^0.5 (0.1 at
    # k = 32), none at full rank (docs/stages.md)
    token_tbat_s: Mapping[int, float] = field(default_factory=lambda: {  # per position under pure sampling at k
        4: 0.3, 64: 1.6, 128: 4.0, 256: 12.5, 512: 40.0, 576: 26.4,  # (one core; 576: tok-full, the mean of 12)
    })
    token_tbat_share: Mapping[str, Mapping[int, float]] = field(default_factory=lambda: {  # another method's time
        "greedy": {4: 0.0}, "top_k": {4: 0.0},  # per position against pure sampling's at k (the demo's heads; any
        "top_p": {64: 0.35, 576: 0.01}, "temperature": {64: 1.15, 576: 2.0},  # method not named here: 1)
    })
    bat_sampling_s_per_byte: float = 4.0e-5  # BA sampling's solver a sampled byte (bn-8, bn-32: 1.07-1.35x top-p)
    token_bat_sampling_s: Mapping[int, float] = field(default_factory=lambda: dict(TOKEN_BAT_SAMPLING_S))  # at k
    token_unargmaxable_s: Mapping[int, float] = field(default_factory=lambda: {  # per head at k (one core)
        4: 20.0, 16: 1350.0, 64: 240.0, 576: 120.0,  # 576: SmolLM2's own head, tok-full
    })
    quality_fixed_s: float = 8.0  # MAUVE's k-means and the judge's load per job
    quality_s_per_byte: float = 3.0e-3  # per byte of sampled text: perplexity under SmolLM2, features, words
    head_fit_flops: float = 1300.0  # per (step x batch row x vocabulary entry) of fitting a learned head
    cpu_decode_efficiency: float = 0.3  # sampling one token at a time on a CPU core, against a training step
    per_job_s: Mapping[str, float] = field(default_factory=lambda: {
        "prepare_corpus": 2.0e-8,  # per byte of the sources' budgets
        "prepare_ground_truth_corpus": 2.0e-8,
        "unargmaxable": 1.0, "time_metrics": 10.0, "effective_rank": 1.5, "ngram_rank": 1.5, "anisotropy": 1.5,
        "svd_model": 3.0, "checkpoint_model": 1.0, "select_prompts": 3.0, "token_prompts": 5.0,
        "convert_smollm2": 40.0,
    })


@dataclass
class JobCost:
    rule: str
    gpu_h: float = 0.0
    cpu_h: float = 0.0
    disk_gb: float = 0.0


# ---------------------------------------------------------------------------------------------------------------
# The jobs of the DAG


@dataclass
class Job:
    """One job of the DAG: its rule, wildcards and benchmark file (None for a rule without one); and, not part of
    what a job is, its files, GPUs and the index of its group among the dry run's (None: in none)."""

    rule: str
    wildcards: dict[str, str] = field(default_factory=dict)
    benchmark: str | None = None
    inputs: list[str] = field(default_factory=list, compare=False)
    outputs: list[str] = field(default_factory=list, compare=False)
    gpus: int = field(default=0, compare=False)
    group: int | None = field(default=None, compare=False)


def dag_jobs(configfiles: Sequence[str | Path], workflow: Path, profile: Path | None = None) -> list[Job]:
    """Every job `all` needs under these config files, whatever exists already (Snakemake of this Python, on the
    workflow in folder `workflow`, planned in an empty folder of its own: no run folder's files or recorded config
    take part), in the groups of `profile` (a Snakemake profile's folder) where one is given."""
    configfiles = configfiles or [workflow / "config" / "config.yaml"]  # not a profile's own config file
    with tempfile.TemporaryDirectory(prefix="oversmooth-plan-") as folder:
        command = [sys.executable, "-m", "snakemake", "-s", str(workflow / "Snakefile"), "--directory", folder, "-n",
                   "-F", "all", "--cores", "1"]
        if profile is not None:
            command += ["--profile", str(profile)]
        # absolute: snakemake runs in the workflow's folder, the user may not
        command += ["--configfile", *(str(Path(f).resolve()) for f in configfiles)]
        out = subprocess.run(command, capture_output=True, text=True, cwd=workflow, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"snakemake -n failed on {configfiles}:\n{out.stderr[-3000:]}")
    return parse_dry_run(out.stdout + out.stderr)


def parse_dry_run(text: str) -> list[Job]:
    """Every job a `snakemake -n` listing shows, with its wildcards, benchmark file, files, GPUs and group (a group's
    jobs are listed, indented, under its `Group job` line)."""
    jobs: list[Job] = []
    groups = 0
    in_group = False
    for raw in text.splitlines():
        line = raw.strip()
        match = re.fullmatch(r"(?:local)?rule (\w+):", line)
        if re.search(r"\] Group job \S+ ", raw):
            groups, in_group = groups + 1, True
        elif match:
            in_group = in_group and raw[:1].isspace()
            jobs.append(Job(match.group(1), group=groups - 1 if in_group else None))
        elif jobs and line.startswith("wildcards:"):
            pairs = line.removeprefix("wildcards:").strip().split(", ")
            jobs[-1].wildcards.update(pair.split("=", 1) for pair in pairs if "=" in pair)
        elif jobs and line.startswith("benchmark:"):
            jobs[-1].benchmark = line.removeprefix("benchmark:").strip()
        elif jobs and line.startswith(("input:", "output:")):
            files = line.split(":", 1)[1].strip().split(", ")
            (jobs[-1].inputs if line.startswith("input:") else jobs[-1].outputs).extend(files)
        elif jobs and line.startswith("resources:"):
            gpus = re.search(r"\bgpu=(\d+)", line)
            jobs[-1].gpus = int(gpus.group(1)) if gpus else 0
    return [job for job in jobs if job.rule != "all"]


# ---------------------------------------------------------------------------------------------------------------
# Model passes


def gpt_parameters(model: Mapping) -> int:
    """Parameters of one of our GPTs (counted on the meta device: no memory; once per shape)."""
    return _parameters(tuple(sorted(model.items())))


@functools.lru_cache(maxsize=None)
def _parameters(shape: tuple[tuple[str, object], ...]) -> int:
    import torch

    from oversmooth.models.model import GPT, GPTConfig

    with torch.device("meta"):
        return GPT(GPTConfig(**dict(shape))).num_parameters()


def training_flops_per_token(model: Mapping) -> float:
    """nanoGPT's estimate: 6 N + 12 L d T per token of a training step (forward and backward)."""
    return 6 * gpt_parameters(model) + 12 * model["n_layer"] * model["n_embd"] * model["block_size"]


def training_flops(config: Mapping, model: str, iterations: int | None = None) -> float:
    """FLOPs of `iterations` steps of a model's training (default: `train.max_iters`, the whole training), its
    evaluations on the way included (a forward pass, a third of a step's FLOPs per token)."""
    settings = training_settings(config, model)
    shape, train = settings["model"], settings["train"]
    iterations = train["max_iters"] if iterations is None else iterations
    tokens = train["batch_size"] * train["grad_accum"] * shape["block_size"] * iterations
    evaluated = iterations / train["eval_interval"] * train["eval_iters"] * 2 * train["batch_size"] * shape["block_size"]
    return training_flops_per_token(shape) * (tokens + evaluated / 3)


def base_model(config: Mapping, name: str) -> str:
    """The trained model whose weights a model's passes run: a checkpoint's run, an SVD-imposed head's source."""
    name = checkpoint_parts(name)[0]
    return svd_source(config) if name.startswith("svd-r") else name


def model_shape(config: Mapping, name: str) -> dict:
    return training_settings(config, base_model(config, name))["model"]


def is_token_ground_truth(config: Mapping, name: str) -> bool:
    return name.startswith("gt-") and ground_truth(config, name)["kind"] == "token"


# ---------------------------------------------------------------------------------------------------------------
# One job's cost


class Planner:
    """Costs of the jobs of one config on one kind of GPU."""

    def __init__(self, config: Mapping, gpu: str, mfu: float, decode_mfu: float, costs: Costs = Costs()):
        if gpu not in GPU_PEAK:
            raise KeyError(f"unknown GPU {gpu!r}; one of {sorted(GPU_PEAK)}")
        self.config, self.costs = config, costs
        self.gpu_flops = GPU_PEAK[gpu] * mfu
        self.decode_flops = GPU_PEAK[gpu] * decode_mfu
        resources = config["resources"]
        self.gpus = {"train": resources["train_gpus"], "inference": resources["inference_gpus"]}

    def job(self, rule: str, wildcards: Mapping[str, str]) -> JobCost:
        cost = JobCost(rule, cpu_h=self.costs.startup_s / 3600)
        handler = getattr(self, f"_{rule}", None)
        if handler is not None:
            handler(cost, wildcards)
        elif rule in self.costs.per_job_s:
            units = self._source_bytes(wildcards.get("model")) if rule.startswith("prepare_") else 1
            cost.cpu_h += self.costs.per_job_s[rule] * units / 3600
        return cost

    # model passes: on a GPU when the job kind has one, else on the job's CPU cores at cpu_flops
    def _flops(self, cost: JobCost, flops: float, kind: str, decode: bool = False) -> None:
        if self.gpus[kind]:
            cost.gpu_h += flops / (self.decode_flops if decode else self.gpu_flops) / 3600
        else:
            cost.cpu_h += flops / (self.costs.cpu_flops * (self.costs.cpu_decode_efficiency if decode else 1)) / 3600

    def _marginal(self, cost: JobCost, positions: float, kind: str) -> None:
        seconds = positions * self.costs.marginal_s_per_position
        if self.gpus[kind]:
            cost.gpu_h += seconds / self.costs.marginal_gpu_speedup / 3600
        else:
            cost.cpu_h += seconds / 3600

    def _training(self, cost: JobCost, model: str, iterations: int) -> None:
        self._flops(cost, training_flops(self.config, model, iterations), "train")

    def _train_segment(self, cost: JobCost, wildcards: Mapping[str, str]) -> None:
        train = training_settings(self.config, wildcards["model"])["train"]
        ends = segment_ends(train)
        end = int(wildcards["iteration"])
        start = max([e for e in ends if e < end], default=0)
        self._training(cost, wildcards["model"], end - start)

    def _train_model(self, cost: JobCost, wildcards: Mapping[str, str]) -> None:
        model = wildcards["model"]
        settings = training_settings(self.config, model)
        train = settings["train"]
        start = max(segment_ends(train), default=0)
        self._training(cost, model, train["max_iters"] - start)
        weights = gpt_parameters(settings["model"]) * BYTES_PER_FLOAT
        kept = (train["max_iters"] // (train["eval_interval"] * train["keep_weights_every"]) + 1
                if train["keep_weights_every"] else 0)
        cost.disk_gb += weights * (2 + kept) / 1e9

    def _inference_tokens(self, cost: JobCost, model: str, tokens: float, decode: bool = False) -> None:
        if is_token_ground_truth(self.config, model):
            self._marginal(cost, tokens, "inference")
        else:
            self._flops(cost, training_flops_per_token(model_shape(self.config, model)) / 3 * tokens, "inference", decode)

    def _evaluate_model(self, cost: JobCost, wildcards: Mapping[str, str]) -> None:
        evaluation = self.config["evaluation"]
        self._inference_tokens(cost, wildcards["model"], evaluation["windows"] * evaluation["block"])

    def _extract_logits(self, cost: JobCost, wildcards: Mapping[str, str]) -> None:
        model, evaluation = wildcards["model"], self.config["eval"]
        positions = evaluation["n_prompts"] * evaluation["window"]
        read = positions if is_token_ground_truth(self.config, model) else evaluation["n_prompts"] * (
            evaluation["context_bytes"] + evaluation["window"])
        self._inference_tokens(cost, model, read)
        cost.disk_gb += positions * 256 * BYTES_PER_FLOAT / 1e9

    def _sample(self, cost: JobCost, wildcards: Mapping[str, str]) -> None:
        """A byte model's samples with every method; BAT sampling's solver on its host."""
        model, sampling = wildcards["model"], self.config["sampling"]
        prompts = sampling["n_prompts"] or self.config["eval"]["n_prompts"]
        methods = byte_sampling_methods(self.config, model)
        per_method = prompts * sampling["continuation_bytes"]
        self._inference_tokens(cost, model, per_method * len(methods), decode=True)
        bat = sum(m in HEAD_METHODS for m in methods)
        self._host_seconds(cost, bat * per_method * self.costs.bat_sampling_s_per_byte)

    _sample_with_bat = _sample  # a byte model sampled with BAT methods: the same job, its script runs the solver

    def _sample_direct(self, cost: JobCost, wildcards: Mapping[str, str]) -> None:
        """A token-track model's samples with the track's methods but BAT sampling's (those: `_sample_bat`)."""
        methods = [m for m in self._token_methods() if m not in HEAD_METHODS]
        self._flops(cost, 2 * SMOLLM2_PARAMETERS * self._token_samples() * len(methods), "inference", decode=True)

    def _sample_bat(self, cost: JobCost, wildcards: Mapping[str, str]) -> None:
        """A token-track head's samples under one BA method, a CPU job: the source's passes on its core and the
        solver (`token_bat_sampling_seconds`)."""
        passes = 2 * SMOLLM2_PARAMETERS * self._token_samples() / (self.costs.cpu_flops * self.costs.cpu_decode_efficiency)
        k = token_rank(wildcards["model"])
        solver = token_bat_sampling_seconds(self.config["tokens"]["sampling"], k, self.costs.token_bat_sampling_s)
        cost.cpu_h += (passes + solver) / 3600

    def _token_samples(self) -> int:
        """The tokens the token track samples per method: prompts x continuation tokens."""
        sampling = self.config["tokens"]["sampling"]
        return sampling["n_prompts"] * sampling["continuation_tokens"]

    def _host_seconds(self, cost: JobCost, seconds: float) -> None:
        """Seconds a sample job spends on its host's CPU (BA sampling's solver): GPU-hours where it holds a GPU,
        which waits meanwhile."""
        if self.gpus["inference"]:
            cost.gpu_h += seconds / 3600
        else:
            cost.cpu_h += seconds / 3600

    def _teacher_corpus(self, cost: JobCost, wildcards: Mapping[str, str]) -> None:
        """A teacher's documents, one byte at a time with its cache (as sampling)."""
        for source in self.config["data"]["sources"]:
            if source["kind"] == "teacher" and f"gt-{source['teacher']}" == wildcards["model"]:
                self._inference_tokens(cost, wildcards["model"], source["documents"] * source["document_bytes"], decode=True)

    def _token_methods(self) -> list[str]:
        return token_methods(self.config)

    def _token_states(self, cost: JobCost, wildcards: Mapping[str, str]) -> None:
        """The source LM's forward pass over the fitting text (`train`) or the prompts' tokens (`eval`)."""
        split = next(iter(wildcards.values()), "train")
        tokens = self.config["tokens"]["fit_tokens"] if split == "train" else self._positions("tok-full")
        self._flops(cost, 2 * SMOLLM2_PARAMETERS * tokens, "inference")
        cost.disk_gb += tokens * SMOLLM2_WIDTH * 2 / 1e9

    def _token_head(self, cost: JobCost, wildcards: Mapping[str, str]) -> None:
        """A learned head: steps x batch x vocabulary (its logits and softmax dominate, whatever k); an SVD head: an
        SVD of the full head, seconds."""
        tokens = self.config["tokens"]
        if token_head_parts(wildcards["model"])[0] == "svd":
            cost.cpu_h += self.costs.per_job_s["svd_model"] / 3600
            return
        work = self.costs.head_fit_flops * tokens["fit_iters"] * tokens["fit_batch_size"] * SMOLLM2_VOCAB
        self._flops(cost, work, "train")

    def _rank_constrained_head(self, cost: JobCost, wildcards: Mapping[str, str]) -> None:
        rank = self.config["rank"]
        shape = model_shape(self.config, svd_source(self.config))
        tokens = rank["head_iters"] * rank["head_batch_size"] * shape["block_size"]
        self._flops(cost, training_flops_per_token(shape) / 3 * tokens, "train")

    def _positions(self, model: str) -> int:
        """Evaluation positions of a model: bytes of the prompts' windows, or about their tokens (4 bytes each)."""
        positions = self.config["eval"]["n_prompts"] * self.config["eval"]["window"]
        return positions // 4 if is_token_model(model) else positions

    def _oversmoothing_metrics(self, cost: JobCost, wildcards: Mapping[str, str]) -> None:
        """Every method at every position, and the model's BA methods at `metrics.bat_positions` (rule bat_decode's
        rows)."""
        model = wildcards["model"]
        vocab = SMOLLM2_VOCAB if is_token_model(model) else 256
        methods = token_measured_methods(self.config) if is_token_model(model) else self.config["decoding"]["methods"]
        rows = (self._positions(model) * len(methods)
                + self._bat_positions(model) * len(byte_bat_methods(self.config, model)))
        cost.cpu_h += rows * self.costs.metrics_s_per_position * (vocab / 256) ** 0.8 / 3600
        cost.disk_gb += rows * 12 * 8 / 1e9

    def _bat_positions(self, model: str, positions: int | str | None = None) -> int:
        """The positions of `metrics.bat_positions` (or `positions`), at most the model's evaluation positions."""
        positions = self.config["metrics"]["bat_positions"] if positions is None else positions
        return self._positions(model) if positions == "all" else min(int(positions), self._positions(model))

    def _bat_decoding_s(self, model: str, k: int, positions: int) -> float:
        """BA-epsilon's and BA-eta's reject sets at `positions` rows of a byte model of head width k: none at full
        rank."""
        rate = 0.0 if k + 1 >= 256 else self.costs.bat_decode_s_per_position * math.sqrt(k / 4)
        return positions * len(byte_bat_methods(self.config, model)) * rate

    def _bat_decode(self, cost: JobCost, wildcards: Mapping[str, str]) -> None:
        model = wildcards["model"]
        positions = self._bat_positions(model)
        cost.cpu_h += self._bat_decoding_s(model, bottleneck_of(model), positions) / 3600
        cost.disk_gb += positions * len(byte_bat_methods(self.config, model)) * 256 * 8 / 1e9

    def _unargmaxable(self, cost: JobCost, wildcards: Mapping[str, str]) -> None:
        """Byte heads: a second; a token head at k: the measured seconds at the nearest measured ranks, the larger
        of the two around k (not monotone: at a low rank one small LP per token, near full rank a search finds
        nearly every vertex, in between both cost); tok-full: the largest rank measured."""
        model = wildcards["model"]
        if is_token_model(model):
            seconds = _measured_around(self.costs.token_unargmaxable_s, model)
        else:
            seconds = self.costs.per_job_s["unargmaxable"]
        cost.cpu_h += seconds / 3600

    def _tbat(self, cost: JobCost, wildcards: Mapping[str, str]) -> None:
        model = wildcards["model"]
        methods = len(self.config["decoding"]["methods"])
        if is_token_model(model):  # each method at its share of pure sampling's rate (greedy and top-k need no LP)
            shares = self.costs.token_tbat_share
            seconds = (token_tbat_positions(self.config, model) * _measured_around(self.costs.token_tbat_s, model)
                       * sum(_measured_around(shares[m], model) if m in shares else 1.0
                             for m in token_tbat_methods(self.config, model)))
        else:  # and TBAT after BA-epsilon and BA-eta at the rows bat_decode decoded (metrics.bat_positions)
            k = bottleneck_of(model) if not model.startswith("gt-") else 256
            rows = (self.config["tbat"]["positions"] * methods
                    + self._bat_positions(model) * len(byte_bat_methods(self.config, model)))
            seconds = rows * self.costs.tbat_s_per_position * math.sqrt(k / 4)
        cost.cpu_h += seconds / 3600

    def _quality(self, cost: JobCost, wildcards: Mapping[str, str]) -> None:
        model, sampling, tokens = wildcards["model"], self.config["sampling"], self.config["tokens"]["sampling"]
        byte_prompts = sampling["n_prompts"] or self.config["eval"]["n_prompts"]
        if model == "human":
            text = byte_prompts * sampling["continuation_bytes"]
        elif is_token_model(model):  # tok-human and the heads: about 4 bytes a token
            methods = 1 if model == "tok-human" else len(self._token_methods())
            text = tokens["n_prompts"] * methods * tokens["continuation_tokens"] * 4
        else:
            text = byte_prompts * len(byte_sampling_methods(self.config, model)) * sampling["continuation_bytes"]
        cost.cpu_h += (self.costs.quality_fixed_s + text * self.costs.quality_s_per_byte) / 3600

    def _source_bytes(self, model: str | None = None) -> float:
        """Bytes the config's corpus (or `model`'s own) reads: the sources' budgets, a teacher's documents."""
        sources = ground_truth(self.config, model)["corpus"] if model else self.config["data"]["sources"]
        return sum(source["documents"] * source["document_bytes"] if source["kind"] == "teacher"
                   else source.get("max_bytes") or 0 for source in sources) or 1e7


# ---------------------------------------------------------------------------------------------------------------
# Families and the report

# A job's family is its benchmark folder (results/benchmarks/<family>/), so that estimates and measurements meet;
# jobs without a benchmark (small CPU jobs, tables and figures) are grouped here.
UNBENCHMARKED = {"checkpoint_model": "train", "svd_model": "rank", "convert_smollm2": "data",
                 "select_prompts": "data", "token_prompts": "data", "join_samples": "samples"}


def _measured_around(measured: Mapping[int, float], model: str) -> float:
    """A token head's rate at its k from the rates measured at some ranks (`cluster.rate_around`); tok-full's, the
    largest rank's."""
    k = token_rank(model)
    return rate_around(measured, max(measured) if k is None else k)


def family_of(job: Job) -> str:
    if job.benchmark:
        return Path(job.benchmark).parent.name
    return UNBENCHMARKED.get(job.rule, "tables, figures")


def plan_table(jobs: Sequence[Job], planner: Planner) -> pd.DataFrame:
    """Per family: jobs, GPU-hours, CPU-hours (start-up included), disk (GB), and the hours of the benchmarked jobs
    alone (what a finished run measures)."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0])
    for job in jobs:
        cost = planner.job(job.rule, job.wildcards)
        row = totals[family_of(job)]
        row[0] += 1
        row[1] += cost.gpu_h
        row[2] += cost.cpu_h
        row[3] += cost.disk_gb
        row[4] += (cost.gpu_h + cost.cpu_h) if job.benchmark else 0.0
    table = pd.DataFrame([[family, *values] for family, values in totals.items()],
                         columns=["family", "jobs", "gpu_h", "cpu_h", "disk_gb", "benchmarked_h"])
    table["jobs"] = table["jobs"].astype(int)
    return table.sort_values("family", ignore_index=True)


def measured_hours(benchmarks: str | Path) -> pd.Series:
    """Wall hours of the benchmarked jobs of a finished run per family (its benchmark folder; the last attempt)."""
    rows = []
    for path in Path(benchmarks).rglob("*.tsv"):
        table = pd.read_csv(path, sep="\t")
        rows.append((path.relative_to(benchmarks).parts[0], float(table["s"].iloc[-1]) / 3600))
    return pd.DataFrame(rows, columns=["family", "hours"]).groupby("family")["hours"].sum()


def resume_state_gb(config: Mapping, models: Sequence[str]) -> float:
    """The largest resume state among trained models (weights, AdamW's two moments, best weights: 4 floats each)."""
    sizes = [gpt_parameters(training_settings(config, m)["model"]) * 4 * BYTES_PER_FLOAT for m in models]
    return max(sizes, default=0) / 1e9


# `make plan`'s defaults, measured (docs/performance.md, "On a GPU"): an H200 trained the thesis shape at 22 % of its
# dense bf16 peak (compiled, 16 x 16 micro-batches) and sampled 100 prompts at once at 0.2 %.
DEFAULT_GPU, DEFAULT_MFU, DEFAULT_DECODE_MFU = "h200", 0.22, 0.002


@dataclass
class Plan:
    """The jobs of a config's DAG (Snakemake's dry run) with the config they price: its table on any GPU (`table`),
    its jobs of one rule (`costs`) and what `make plan` prints (`report`)."""

    configfiles: list[str]
    config: Mapping
    jobs: list[Job]  # in the SLURM profile's groups
    local: frozenset[str]  # the rules whose jobs run where snakemake runs

    def submissions(self) -> Submissions:
        """What the jobs make on a SLURM cluster under the project's profile: submissions, groups, local jobs."""
        return count_submissions(self.jobs, self.local)

    def planner(self, gpu: str = DEFAULT_GPU, mfu: float = DEFAULT_MFU,
                decode_mfu: float = DEFAULT_DECODE_MFU) -> Planner:
        return Planner(self.config, gpu, mfu, decode_mfu)

    def table(self, gpu: str = DEFAULT_GPU, mfu: float = DEFAULT_MFU,
              decode_mfu: float = DEFAULT_DECODE_MFU) -> pd.DataFrame:
        """`plan_table` with a last row `total`."""
        table = plan_table(self.jobs, self.planner(gpu, mfu, decode_mfu))
        total = table.drop(columns="family").sum()
        table.loc[len(table)] = ["total", int(total["jobs"]), *total.drop("jobs")]
        return table

    def costs(self, rule: str, gpu: str = DEFAULT_GPU, mfu: float = DEFAULT_MFU,
              decode_mfu: float = DEFAULT_DECODE_MFU) -> list[JobCost]:
        """The cost of each job of `rule`."""
        planner = self.planner(gpu, mfu, decode_mfu)
        return [planner.job(job.rule, job.wildcards) for job in self.jobs if job.rule == rule]

    def trained_models(self) -> list[str]:
        return sorted({job.wildcards["model"] for job in self.jobs if job.rule == "train_model"})

    def report(self, gpu: str = DEFAULT_GPU, mfu: float = DEFAULT_MFU, decode_mfu: float = DEFAULT_DECODE_MFU,
               benchmarks: str | Path | None = None) -> str:
        """The plan as `make plan` prints it: the jobs and the largest resume state, then the table per family
        (with a finished run's `benchmarks`: its measured hours beside), then the SLURM submissions."""
        table = self.table(gpu, mfu, decode_mfu)
        if benchmarks:
            measured = measured_hours(benchmarks)
            measured["total"] = measured.sum()
            table["measured_h"] = table["family"].map(measured)
            table["estimate / measured"] = table["benchmarked_h"] / table["measured_h"]
        else:
            table = table.drop(columns="benchmarked_h")
        return "\n".join([
            f"plan for {' '.join(map(str, self.configfiles)) or 'config/config.yaml'}: {len(self.jobs)} jobs; largest "
            f"resume state {resume_state_gb(self.config, self.trained_models()):.2f} GB",
            f"GPU-hours on {gpu} at {mfu:.0%} of its bf16 peak (decoding {decode_mfu:.1%}); CPU-hours on one core of "
            "the project's machine",
            table.to_string(index=False, float_format=lambda v: f"{v:,.2f}"),
            *submission_report(self.submissions(), Costs().snakemake_startup_s)])


def compute_plan(configfiles: Sequence[str | Path], base: Path | None = None, workflow: Path | None = None) -> Plan:
    """The plan of the workflow's config/config.yaml under `configfiles` (relative paths from `base`, default the
    working folder; the report names them as given): its config and the jobs Snakemake's dry run lists. `workflow`:
    the workflow's folder (default: `workflow_folder()`'s). The dry run is the SLURM profile's, for its groups."""
    workflow = workflow or workflow_folder()
    paths = [(base or Path.cwd()) / f for f in configfiles] or [workflow / "config" / "config.yaml"]
    config = load_config(workflow / "config" / "config.yaml", *paths)
    jobs = dag_jobs(paths, workflow, workflow / PROFILE)
    return Plan([str(f) for f in configfiles], config, jobs, local_rules(paths, workflow))


def submission_report(submissions: Submissions, startup_s: float) -> list[str]:
    """The lines `make plan` prints on a config's SLURM submissions under the profile, with and without its groups
    (a Snakemake start-up costing `startup_s`)."""
    table = submission_table(submissions, startup_s).to_string(index=False, float_format=lambda v: f"{v:,.2f}")
    return [f"SLURM under {PROFILE}: {submissions.cluster_jobs} jobs on the cluster "
            f"({submissions.local} on the submit host) in {submissions.submitted} submissions: {submissions.groups} "
            f"groups, {submissions.alone} alone",
            f"a submission waits in the queue once and starts a Snakemake ({startup_s:g} s) on its node, as each of "
            "its jobs does", *table.splitlines()]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configfile", nargs="*", default=[], help="config files over config/config.yaml")
    parser.add_argument("--gpu", default=DEFAULT_GPU, choices=sorted(GPU_PEAK))
    parser.add_argument("--mfu", type=float, default=DEFAULT_MFU,
                        help="training and inference: share of the GPU's bf16 peak")
    parser.add_argument("--decode-mfu", type=float, default=DEFAULT_DECODE_MFU, help="sampling one token at a time")
    parser.add_argument("--benchmarks", help="a finished run's results/benchmarks: measured hours per family beside")
    parser.add_argument("--workflow", help="the workflow's folder (default: this package's checkout, or the current "
                        "folder's)")
    args = parser.parse_args(argv)
    print(compute_plan(args.configfile, workflow=workflow_folder(args.workflow)).report(
        args.gpu, args.mfu, args.decode_mfu, args.benchmarks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
