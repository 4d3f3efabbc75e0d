# TBAT (thesis §4.1.6, appendix D): exact BAT-reject sets by linear programming. A CPU rule.


rule tbat:
    input:
        logits=logits_path("{model}"),
        checkpoint=model_path("{model}", "best.pt"),
    output:
        positions=tbat_path("{model}"),
        summary=tbat_path("{model}", "summary"),
    wildcard_constraints:
        model=r"bn-\d+",
    params:
        tbat=config["tbat"],
        decoding=config["decoding"],
        bootstrap={k: config["metrics"][k] for k in ("bootstrap", "confidence")},
        seed=config["seed"],
    threads: config["tbat"]["threads"]
    log:
        log_path("tbat", "{model}"),
    benchmark:
        benchmark_path("tbat", "{model}")
    conda:
        "../envs/torch.yaml"
    script:
        "../workflow/scripts/tbat.py"
