"""What the Snakemake workflow calls (the top layer): the rules' helpers, the config, the registry of outputs, the
compute plan and a run's profile."""
