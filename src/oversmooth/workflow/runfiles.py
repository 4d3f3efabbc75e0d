"""Every file a run keeps, from the workflow's own rules: what `all` asks for, intermediate results included.

Snakemake rebuilds a missing file only where a job that has to run needs it: a deleted intermediate result (an
evaluation, a sample table, a checkpoint) whose readers are up to date stays missing, and `snakemake -n all` says
"Nothing to be done". The target `all` therefore names every output of every job its tables and figures take, found
by walking back from them through the rules as Snakemake resolves them (each file's producing rule, its wildcards,
its input functions), so that `all` rebuilds any missing file of the run. Temporary outputs (`temp()`, a training's
hand-over state) are walked through but not asked for: they are deleted once read.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from snakemake.io import is_flagged
from snakemake.iocontainers import Wildcards


def producers(rules: Sequence, file: str) -> list:
    """The rules whose output patterns (with their wildcard constraints) match `file`."""
    return [rule for rule in rules if any(pattern.match(file) for pattern in rule.output)]


def producer(rules: Sequence, file: str, ruleorder=None):
    """The rule that makes `file`, None for a file no rule makes (a source); the `ruleorder`'s first where several
    match, as Snakemake chooses. Raises ValueError naming the rules where the order does not decide."""
    candidates = producers(rules, file)
    if len(candidates) > 1 and ruleorder is not None:
        first = [rule for rule in candidates
                 if all(ruleorder.compare(rule, other) >= 0 for other in candidates if other is not rule)]
        candidates = first or candidates
    if len(candidates) > 1:
        raise ValueError(f"{file}: made by several rules ({', '.join(r.name for r in candidates)}) with no ruleorder "
                         "between them")
    return candidates[0] if candidates else None


def job_files(rule, file: str) -> tuple[list[str], list[str]]:
    """The outputs (temporary ones left out) and inputs of the job of `rule` that makes `file`."""
    wildcards = Wildcards(fromdict=rule.get_wildcards(file))
    outputs, _ = rule.expand_output(wildcards)
    inputs, *_ = rule.expand_input(wildcards)
    return [str(f) for f in outputs if not is_flagged(f, "temp")], [str(f) for f in inputs]


def run_files(rules: Sequence, targets: Iterable[str], ruleorder=None) -> list[str]:
    """Every non-temporary output of the jobs that building `targets` takes, `targets` included, in the order the
    walk meets them (the walk of the module docstring). `rules`: the workflow's rules (`workflow.rules`); rules that
    run nothing (`all`) are skipped."""
    rules = [rule for rule in rules if not rule.norun]
    queue, seen, files = list(targets), set(), {}
    while queue:
        file = queue.pop()
        if file in seen:
            continue
        seen.add(file)
        rule = producer(rules, file, ruleorder)
        if rule is None:
            continue
        outputs, inputs = job_files(rule, file)
        seen.update(outputs)
        files.update(dict.fromkeys(outputs))
        queue.extend(f for f in inputs if f not in seen)
    return list(files)
