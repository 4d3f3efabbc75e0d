"""The grammar of model names, as the regular expressions the rules constrain their `{model}` wildcards with.

    bn-<k>            a bottlenecked model (the family), k the rank of its head
    bn-<k>-s<seed>    the same k trained again under another seed
    <model>@<it>      the weights of a bottlenecked run after <it> training iterations (a checkpoint)
    mos-<k>           a Mixture-of-Softmaxes member of the family
    svd-r<r>          the widest bottleneck's head truncated to rank r after training
    gt-<name>         a ground truth (trained here, or loaded)
    tok-<kind>-r<k>   a rank-k head of the token track (kind: svd or learned); tok-full its source's own head
    human, tok-human  the human continuations of the byte and the token track (their quality rows)

`oversmooth.core.catalog` builds and parses these names; a test holds every name it builds to this grammar.
"""

from __future__ import annotations

import re

KINDS = {
    "bottleneck": r"bn-\d+(?:-s\d+)?",  # a bottlenecked run, under the master seed or another
    "checkpoint": r"bn-\d+(?:-s\d+)?@\d+",
    "mos": r"mos-\d+",
    "svd": r"svd-r\d+",
    "ground_truth": r"gt-[A-Za-z0-9_.]+",
    "token_head": r"tok-(?:svd|learned)-r\d+",
    "token_reference": r"tok-full",
    "human": r"human",
    "token_human": r"tok-human",
}


def pattern(*kinds: str) -> str:
    """The regular expression of the names of `kinds` (keys of KINDS): a wildcard constraint."""
    unknown = [kind for kind in kinds if kind not in KINDS]
    if unknown:
        raise KeyError(f"unknown model kind(s) {unknown}: the kinds are {list(KINDS)}")
    return "|".join(KINDS[kind] for kind in kinds)


def kind_of(name: str) -> str:
    """The kind of a model name; a ValueError naming the grammar for a name of none."""
    for kind, regex in KINDS.items():
        if re.fullmatch(regex, name):
            return kind
    raise ValueError(f"{name!r} is no model name: the grammar is {KINDS}")
