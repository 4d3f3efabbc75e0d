"""The data stage: corpus sources, split and byte shards, prompts, byte names."""
