# The data stage's helpers (rules/data.smk): its input functions and the settings its rules pass on.
# Snakemake keeps functions and rules in separate files (snakemake --lint).


def local_source_files(wildcards=None):
    """Local files read by `files` sources (folders expanded), so that editing one of them reruns the data stage."""
    return [path for source in config["data"]["sources"] if source["kind"] == "files" for path in source_files(source)]
