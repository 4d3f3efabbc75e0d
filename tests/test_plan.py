"""The compute plan: jobs from Snakemake's dry run, FLOPs by hand, GPU or CPU by the job's resources."""

import pytest

from oversmooth.workflow.config import load_config
from oversmooth.workflow.plan import (
    GPU_PEAK,
    Costs,
    Job,
    Planner,
    gpt_parameters,
    measured_hours,
    parse_dry_run,
    plan_table,
    training_flops_per_token,
)
from oversmooth.workflow.source import workflow_folder

DRY_RUN = """\
[Mon Nov 23 23:18:54 2026]
rule train_segment:
    output: results/models/bn-4/segments/100.pt
    benchmark: results/benchmarks/train/bn-4.to-100.tsv
    wildcards: model=bn-4, iteration=100
    resources: tmpdir=/tmp

[Mon Nov 23 23:18:54 2026]
localrule metrics_table:
    output: results/tables/table_4_1.csv
    wildcards: table=table_4_1

rule all:
    input: results/tables/table_4_1.csv
"""


def test_jobs_and_wildcards_are_read_from_a_dry_run():
    assert parse_dry_run(DRY_RUN) == [Job("train_segment", {"model": "bn-4", "iteration": "100"},
                                          "results/benchmarks/train/bn-4.to-100.tsv"),
                                      Job("metrics_table", {"table": "table_4_1"})]


def test_parameters_and_training_flops_by_hand():
    model = {"block_size": 8, "n_layer": 1, "n_head": 1, "n_embd": 4, "bottleneck": 2, "dropout": 0.0}
    # wte 256x4 (tied? no: the head is separate) + wpe 8x4 + block (2 LN 2x4 each, attn 4x12+12, proj 4x4+4,
    # mlp 4x16+16, 16x4+4) + ln_f 2x4 + head (4x2+2, LN 2x2, 2x256)
    expected = 256 * 4 + 8 * 4 + (8 + 8 + 60 + 20 + 80 + 68) + 8 + (10 + 4 + 512)
    assert gpt_parameters(model) == expected
    assert training_flops_per_token(model) == 6 * expected + 12 * 1 * 4 * 8


def _planner(tmp_path, yaml_text, **kwargs):
    override = tmp_path / "override.yaml"
    override.write_text(yaml_text)
    return Planner(load_config(workflow_folder() / "config" / "config.yaml", override), "a100", 0.5, 0.01, **kwargs)


def test_a_training_split_into_segments_costs_what_one_job_does(tmp_path):
    planner = _planner(tmp_path, "train: {max_iters: 250, iters_per_job: 100}\nresources: {train_gpus: 1}\n")
    segments = [planner.job("train_segment", {"model": "bn-4", "iteration": str(i)}) for i in (100, 200)]
    last = planner.job("train_model", {"model": "bn-4"})
    whole = _planner(tmp_path, "train: {max_iters: 250}\nresources: {train_gpus: 1}\n").job("train_model", {"model": "bn-4"})
    assert sum(job.gpu_h for job in segments) + last.gpu_h == pytest.approx(whole.gpu_h)
    assert segments[0].gpu_h == pytest.approx(2 * last.gpu_h)  # 100 iterations against the last 50
    shape = planner.config["model"] | {"bottleneck": 4}
    train = planner.config["train"]
    tokens = train["batch_size"] * shape["block_size"] * 250
    evaluation = 250 / train["eval_interval"] * train["eval_iters"] * 2 * train["batch_size"] * shape["block_size"] / 3
    assert whole.gpu_h == pytest.approx(training_flops_per_token(shape) * (tokens + evaluation) / (0.5 * GPU_PEAK["a100"]) / 3600)
    assert whole.cpu_h == pytest.approx(Costs().startup_s / 3600)  # on the GPU: only the start-up is CPU time


def test_without_a_gpu_model_passes_cost_cpu_hours_at_the_cpu_rate(tmp_path):
    planner = _planner(tmp_path, "resources: {inference_gpus: 0}\n")
    job = planner.job("evaluate_model", {"model": "bn-4"})
    tokens = planner.config["evaluation"]["windows"] * planner.config["evaluation"]["block"]
    flops = training_flops_per_token(planner.config["model"] | {"bottleneck": 4}) / 3 * tokens
    assert job.gpu_h == 0 and job.cpu_h == pytest.approx((flops / Costs().cpu_flops + Costs().startup_s) / 3600)


def test_a_token_head_s_unargmaxable_job_costs_the_larger_measured_rate_around_its_rank(tmp_path):
    planner = _planner(tmp_path, "")
    measured = {4: 20.0, 16: 1350.0, 64: 240.0, 576: 120.0}
    assert Costs().token_unargmaxable_s == measured
    for model, seconds in (("tok-svd-r4", 20.0), ("tok-learned-r8", 1350.0), ("tok-svd-r32", 1350.0),
                           ("tok-svd-r128", 240.0), ("tok-full", 120.0)):
        cpu_h = planner.job("unargmaxable", {"model": model}).cpu_h
        assert cpu_h == pytest.approx((seconds + Costs().startup_s) / 3600), model


def test_a_token_head_s_tbat_job_costs_its_positions_times_the_rate_around_its_rank_times_its_methods_shares(tmp_path):
    planner = _planner(tmp_path, "tokens: {tbat_positions: 10, full_tbat_positions: null, full_tbat_methods: null}\n"
                                 "decoding: {methods: [pure, greedy, top_k, top_p, temperature]}\n")
    assert planner.config["decoding"]["methods"] == ["pure", "greedy", "top_k", "top_p", "temperature"]
    assert Costs().token_tbat_s == {4: 0.3, 64: 1.6, 128: 4.0, 256: 12.5, 512: 40.0, 576: 26.4}
    # pure 1, greedy and top-k 0, top-p 0.35 and temperature 1.15 up to k = 64; above it the larger of 64's and
    # the full head's (0.35 and 2.0), the full head its own (0.01 and 2.0)
    for model, seconds, shares in (("tok-svd-r4", 0.3, 2.5), ("tok-learned-r32", 1.6, 2.5),
                                   ("tok-svd-r200", 12.5, 3.35), ("tok-full", 26.4, 3.01)):
        cpu_h = planner.job("tbat", {"model": model}).cpu_h
        assert cpu_h == pytest.approx((10 * seconds * shares + Costs().startup_s) / 3600), model


def test_tok_full_s_tbat_job_is_priced_at_its_own_positions_and_methods(tmp_path):
    planner = _planner(tmp_path, "tokens: {tbat_positions: 10, full_tbat_positions: 3, full_tbat_methods: [pure]}\n"
                                 "decoding: {methods: [pure, greedy, top_k, top_p, temperature]}\n")
    startup = Costs().startup_s
    assert planner.job("tbat", {"model": "tok-full"}).cpu_h == pytest.approx((3 * 1 * 26.4 + startup) / 3600)
    assert planner.job("tbat", {"model": "tok-svd-r4"}).cpu_h == pytest.approx((10 * 2.5 * 0.3 + startup) / 3600)


def test_families_are_benchmark_folders_and_a_finished_run_is_read_per_family(tmp_path):
    planner = _planner(tmp_path, "")
    jobs = [Job("tbat", {"model": "bn-4"}, "results/benchmarks/tbat/bn-4.tsv"),
            Job("tbat", {"model": "bn-256"}, "results/benchmarks/tbat/bn-256.tsv"),
            Job("svd_model", {"model": "svd-r4"}), Job("metrics_table", {})]
    table = plan_table(jobs, planner).set_index("family")
    assert table["jobs"].to_dict() == {"rank": 1, "tables, figures": 1, "tbat": 2}
    assert table.loc["rank", "benchmarked_h"] == 0 and table.loc["tbat", "benchmarked_h"] == pytest.approx(
        table.loc["tbat", "cpu_h"])
    for stage, name, seconds in (("tbat", "bn-4", 36.0), ("tbat", "bn-8", 36.0), ("train", "bn-4", 72.0)):
        (tmp_path / "benchmarks" / stage).mkdir(parents=True, exist_ok=True)
        (tmp_path / "benchmarks" / stage / f"{name}.tsv").write_text(f"s\th:m:s\tcpu_time\n{seconds}\t0:00:36\t30.0\n")
    assert measured_hours(tmp_path / "benchmarks").to_dict() == {"tbat": 0.02, "train": 0.02}


def test_the_pilot_s_plan_stays_within_4_gpu_hours_and_splits_its_trainings(capsys):
    """config/pilot.yaml proves the cluster path before the thesis config: its plan (the real DAG) must stay small,
    and its trainings run as several jobs, as the thesis config's do."""
    from oversmooth.workflow.plan import main

    assert main(["--configfile", "config/pilot.yaml"]) == 0
    lines = capsys.readouterr().out.splitlines()
    total = next(line.split() for line in lines if line.strip().startswith("total"))
    assert 0.5 <= float(total[2].replace(",", "")) <= 4.0  # GPU-hours at `make plan`'s defaults (an H200 at 22 %)
    train = next(line.split() for line in lines if line.strip().startswith("train "))
    # 3 k x 2 seeds and the MoS member in 3 jobs of 2,000 steps each, the ground truth in 4; 6 checkpoints; the
    # token track's 6 heads (their benchmarks sit in the train folder)
    assert int(train[1]) == 7 * 3 + 4 + 6 + 6


def test_ba_methods_are_priced_in_bat_decode_metrics_and_tbat_at_their_positions_none_at_full_rank(tmp_path):
    planner = _planner(tmp_path, "decoding: {methods: [pure, greedy, top_k, top_p, temperature], "
                                 "bat_methods: [ba_epsilon, ba_eta]}\nmetrics: {bat_positions: 50}\n"
                                 "tbat: {positions: 20}\n")
    startup, rate = Costs().startup_s, Costs().bat_decode_s_per_position
    assert rate == 0.03 and Costs().tbat_s_per_position == 1.6e-3
    # two BA methods x 50 positions at 0.03 s x sqrt(k / 4): bn-16 twice bn-4's rate, bn-256 (full rank) none
    assert planner.job("bat_decode", {"model": "bn-4"}).cpu_h == pytest.approx((2 * 50 * 0.03 + startup) / 3600)
    assert planner.job("bat_decode", {"model": "bn-16"}).cpu_h == pytest.approx((2 * 50 * 0.06 + startup) / 3600)
    assert planner.job("bat_decode", {"model": "bn-256"}).cpu_h == pytest.approx(startup / 3600)
    assert planner.job("bat_decode", {"model": "bn-4"}).disk_gb == pytest.approx(2 * 50 * 256 * 8 / 1e9)
    # TBAT: 5 methods at 20 positions, and after BA's 2 at the 50 rows bat_decode decoded (no reject sets again)
    tbat = planner.job("tbat", {"model": "bn-16"}).cpu_h
    assert tbat == pytest.approx(((20 * 5 + 50 * 2) * 1.6e-3 * 2 + startup) / 3600)
    # the metrics: 5 methods at every position (config.yaml: 16 prompts x 400) and BA's 2 at 50; MoS has no BA
    positions = planner.config["eval"]["n_prompts"] * planner.config["eval"]["window"]
    rows = {"bn-4": positions * 5 + 50 * 2, "mos-4": positions * 5}
    for model, n in rows.items():
        cost = planner.job("oversmoothing_metrics", {"model": model, "gt": "gt-nanogpt"})
        assert cost.cpu_h == pytest.approx((n * Costs().metrics_s_per_position + startup) / 3600), model



def test_ba_sampling_s_solver_is_priced_on_a_byte_sample_job_s_gpu_and_in_a_token_head_s_own_cpu_job(tmp_path):
    # a byte model's solver runs on its sample job's host while the GPU waits: GPU-hours where the job holds one; a
    # token head's BA methods run in CPU jobs of their own (rule sample_bat), one per method, each asking SLURM for
    # 1.5 x its estimate x the attempt
    from dataclasses import replace

    from oversmooth.core.cluster import bat_sampling_runtime, token_bat_sampling_seconds

    costs = Costs()
    assert costs.bat_sampling_s_per_byte == 4.0e-5 and costs.token_bat_sampling_s == {64: 0.12, 576: 0.32}
    overlay = ("sampling: {n_prompts: 10, continuation_bytes: 100}\nresources: {inference_gpus: 1}\n"
               "decoding: {bat_methods: [ba_epsilon, ba_eta]}\nmos: {bottlenecks: [4]}\n"
               "tokens: {sampling: {n_prompts: 4, continuation_tokens: 50, methods: [pure, ba_eta]}}\n")
    priced = _planner(tmp_path, overlay)
    free = _planner(tmp_path, overlay, costs=replace(costs, bat_sampling_s_per_byte=0.0,
                                                     token_bat_sampling_s={64: 0.0, 576: 0.0}))
    solver_h = {m: priced.job(rule, {"model": m}).gpu_h - free.job(rule, {"model": m}).gpu_h
                for rule, m in (("sample_with_bat", "bn-8"), ("sample", "mos-4"), ("sample_direct", "tok-svd-r64"),
                                ("sample_direct", "tok-full"))}
    assert solver_h["bn-8"] == pytest.approx(2 * 10 * 100 * 4.0e-5 / 3600)  # two BA methods x 1,000 bytes
    assert solver_h["mos-4"] == 0 and solver_h["tok-svd-r64"] == solver_h["tok-full"] == 0  # none, or own jobs
    for model, rate in (("tok-svd-r64", 0.12), ("tok-svd-r4", 0.12), ("tok-full", 0.32)):  # one BA method x 200
        job = {"model": model, "method": "ba_eta"}
        solver_h = priced.job("sample_bat", job).cpu_h - free.job("sample_bat", job).cpu_h
        assert solver_h == pytest.approx(200 * rate / 3600) and priced.job("sample_bat", job).gpu_h == 0, model
        k = None if model == "tok-full" else int(model.rsplit("-r", 1)[1])
        assert token_bat_sampling_seconds(priced.config["tokens"]["sampling"], k) == pytest.approx(200 * rate)
    assert bat_sampling_runtime(6000.0, 240, 1) == 240 and bat_sampling_runtime(12000.0, 240, 1) == 300
    assert bat_sampling_runtime(12000.0, 240, 2) == 600  # a retry after its time ran out asks for more
