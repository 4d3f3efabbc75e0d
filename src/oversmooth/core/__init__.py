"""What every stage shares: the model catalog and the grammar of model names, paths, I/O, logs, provenance, cluster
resources, labels, the plotting back end, spectra and the allocator."""
