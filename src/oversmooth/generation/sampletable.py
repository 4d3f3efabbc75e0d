"""The samples' table: its schema, and one model's samples joined from the tables of the jobs that sampled its
methods (a token head's BAT-sampling methods run in CPU jobs of their own). No torch: the join is a job of seconds."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

SAMPLES_SCHEMA = pa.schema(
    [
        ("model", pa.string()),
        ("method", pa.string()),
        ("prompt_id", pa.int32()),
        ("seed", pa.int64()),
        ("prefix", pa.binary()),
        ("continuation", pa.binary()),
        ("text", pa.string()),
    ]
)


def join_samples(tables: Sequence[pa.Table], methods: Sequence[str]) -> pa.Table:
    """One model's samples from the tables of the jobs that sampled its methods (a token head's direct sampling
    job's and its BAT-sampling jobs'), the methods in `methods`' order, each method's rows in its table's order: what one job
    sampling every method writes. A ValueError names a method no table holds or two tables hold."""
    by_method: dict[str, pa.Table] = {}
    for table in tables:
        for method in dict.fromkeys(table.column("method").to_pylist()):
            if method in by_method:
                raise ValueError(f"two sample tables hold method {method!r}")
            by_method[method] = table.filter(pc.equal(table.column("method"), method))
    missing = [m for m in methods if m not in by_method]
    if missing or set(by_method) - set(methods):
        raise ValueError(f"the sample tables hold methods {sorted(by_method)}, not {list(methods)}: missing {missing}")
    return pa.concat_tables([by_method[m].cast(SAMPLES_SCHEMA) for m in methods])
