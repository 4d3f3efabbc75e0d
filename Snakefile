# oversmooth: how the softmax bottleneck makes byte-level language models oversmooth.
#   snakemake --cores all all                                  embedded CPU default (config/config.yaml)
#   snakemake all --cores all --directory runs/thesis --configfile config/thesis.yaml   thesis scale, in its own folder
import os
import sys
from pathlib import Path

from snakemake.logging import logger
from snakemake.utils import min_version

import oversmooth
from oversmooth.core.recovery import RUN_VARIABLE, command_line_profiles, run_options, run_record
from oversmooth.workflow.config import check_paths, check_run_folder, shared_results_warning, validate_config
from oversmooth.workflow.groups import GROUPED_RULES, job_group

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
# The run's options, for the commands the jobs' errors advise (oversmooth.core.recovery): in the environment the jobs
# inherit, not in the config, whose values can reach rules' params. A cluster job keeps its controller's.
if workflow.is_main_process or RUN_VARIABLE not in os.environ:
    typed = workflow.is_main_process and "snakemake" in Path(sys.argv[0]).as_posix()  # the command line, no API
    os.environ[RUN_VARIABLE] = run_record(ROOT, run_options(
        ROOT, os.getcwd(), configfiles=workflow.overwrite_configfiles, config=workflow.config_settings.config,
        profiles=command_line_profiles(sys.argv) if typed else [], cores=workflow.resource_settings.cores))


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


# Jobs that share a cluster submission (oversmooth.workflow.groups.job_group): a group is on where the run's
# `group-components` name it (profiles/slurm), so that a local run, and its dry run, have none.
def cluster_group(rule_name):
    def group(wildcards):
        name = job_group(rule_name, dict(wildcards.items()), config)
        return name if name in workflow.group_settings.group_components else None

    return group


for grouped_rule in workflow.rules:
    if grouped_rule.name in GROUPED_RULES:
        grouped_rule.group = cluster_group(grouped_rule.name)
