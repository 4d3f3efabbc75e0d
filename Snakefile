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
from oversmooth.workflow.groups import set_cluster_groups
from oversmooth.workflow.runconfig import (
    REPLACE_KEY, check_run_config, config_files, record_run_config, replace_requested,
)
from oversmooth.workflow.runfiles import run_files
from oversmooth.workflow.source import SOURCE_VARIABLE

min_version("9.0")

ROOT = Path(workflow.basedir)
# For envs/oversmooth.post-deploy.sh, which installs this folder's package into the rules' conda environment
os.environ[SOURCE_VARIABLE] = str(ROOT)


configfile: ROOT / "config" / "config.yaml"


report: "workflow/report/workflow.rst"


check_run_folder(ROOT, os.getcwd(), directory_given=workflow.overwrite_workdir is not None)
# The run folder's config files (oversmooth.workflow.runconfig): a command naming others is refused before any job;
# the first command that runs jobs here records them.
RUN_CONFIG_FILES = config_files(ROOT, workflow.overwrite_configfiles or [])
REPLACE_RUN_CONFIG = replace_requested(config)
config.pop(REPLACE_KEY, None)
if workflow.is_main_process:
    check_run_config(os.getcwd(), RUN_CONFIG_FILES, replace=REPLACE_RUN_CONFIG)
validate_config(config)  # the schema ships with the package (oversmooth/workflow/config.schema.yaml)
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
        ROOT, os.getcwd(), configfiles=workflow.overwrite_configfiles,
        config={k: v for k, v in workflow.config_settings.config.items() if k != REPLACE_KEY},
        profiles=command_line_profiles(sys.argv) if typed else [], cores=workflow.resource_settings.cores))


onstart:
    record_run_config(os.getcwd(), RUN_CONFIG_FILES, replace=REPLACE_RUN_CONFIG)


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


# Every file of the run, intermediate results included (oversmooth.workflow.runfiles): `all` rebuilds any that is
# missing, where Snakemake alone rebuilds only what a job that has to run reads.
rule all:
    input:
        lambda wildcards: run_files(workflow.rules, all_targets(), workflow._ruleorder),
    default_target: True


# Jobs that share a cluster submission (oversmooth.workflow.groups.job_group): a group is on where the run's
# `group-components` name it (profiles/slurm), so that a local run, and its dry run, have none.
set_cluster_groups(workflow.rules, lambda: workflow.group_settings.group_components, config)
