# oversmooth: how the softmax bottleneck makes byte-level language models oversmooth.
#   snakemake --cores all all                                  embedded CPU default (config/config.yaml)
#   snakemake all --directory runs/thesis --configfile config/thesis.yaml ...   thesis scale, in a folder of its own
import os
from pathlib import Path

from snakemake.logging import logger
from snakemake.utils import min_version

import oversmooth
from oversmooth.workflow.config import check_paths, check_run_folder, shared_results_warning, validate_config

min_version("9.0")

ROOT = Path(workflow.basedir)


configfile: ROOT / "config" / "config.yaml"


report: "workflow/report/workflow.rst"


check_run_folder(ROOT, os.getcwd(), directory_given=workflow.overwrite_workdir is not None)
validate_config(config, ROOT / "config" / "schema" / "config.schema.yaml")
for notice in check_paths(config):
    logger.info(f"note: {notice}")
if warning := shared_results_warning(config, ROOT, os.getcwd()):
    logger.warning(f"warning: {warning}")
config["oversmooth_version"] = oversmooth.__version__  # for the report (after validation; no rule reads it)


include: "rules/common.smk"
include: "rules/helpers/data.smk"
include: "rules/helpers/train.smk"
include: "rules/helpers/tokens.smk"
include: "rules/helpers/logits.smk"
include: "rules/helpers/metrics.smk"
include: "rules/helpers/tbat.smk"
include: "rules/helpers/rank.smk"
include: "rules/helpers/sampling.smk"
include: "rules/helpers/report.smk"
include: "rules/data.smk"
include: "rules/train.smk"
include: "rules/logits.smk"
include: "rules/metrics.smk"
include: "rules/tbat.smk"
include: "rules/rank.smk"
include: "rules/sampling.smk"
include: "rules/tokens.smk"
include: "rules/report.smk"


rule all:
    input:
        all_targets(),
    default_target: True
