"""Start-up of each workflow script: the wall and CPU seconds a fresh Python pays to import what the script
imports, before it does any work — what every job of its rule pays again.

Each script's import lines run in a new interpreter (`python -X importtime` also lists the slowest modules),
`--repeat` times; the median is printed per script and per heavy dependency it pulls in:
    python benchmarks/import_time.py [--repeat 3] [--scripts tbat metrics_table] [--baseline /path/to/old/checkout]
With `--baseline`, the same scripts of another checkout (its `src/` first on the path) run side by side and the
ratio baseline / now is printed per script.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "scipy", "pandas", "pyarrow", "matplotlib", "seaborn", "sklearn", "highspy")
PROBE = """
import os, sys, time
t0, c0 = time.perf_counter(), sum(os.times()[:2])
{imports}
print(time.perf_counter() - t0, sum(os.times()[:2]) - c0)
print(" ".join(m for m in {heavy!r} if m in sys.modules))
"""


def script_imports(script: Path) -> str:
    """The top-level import statements of a workflow script."""
    tree = ast.parse(script.read_text())
    return "\n".join(ast.get_source_segment(script.read_text(), node) for node in tree.body
                     if isinstance(node, (ast.Import, ast.ImportFrom)))


def measure(imports: str, src: Path, repeat: int) -> tuple[float, float, str]:
    """Median (wall s, CPU s) of importing `imports` in a fresh interpreter with `src` first on the path, and the
    heavy packages it loaded."""
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    walls, cpus, heavy = [], [], ""
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", PROBE.format(imports=imports, heavy=HEAVY)], env=env,
                             capture_output=True, text=True, check=True).stdout.splitlines()
        wall, cpu = map(float, out[0].split())
        walls.append(wall), cpus.append(cpu)
        heavy = out[1] if len(out) > 1 else ""
    return statistics.median(walls), statistics.median(cpus), heavy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scripts", nargs="*", help="script names (default: every workflow script)")
    parser.add_argument("--baseline", type=Path, help="another checkout of the repository to compare with")
    args = parser.parse_args()
    scripts = sorted((REPO / "workflow" / "scripts").glob("*.py"))
    if args.scripts:
        scripts = [s for s in scripts if s.stem in args.scripts]
    header = f"{'script':24s} {'wall s':>7s} {'CPU s':>7s}"
    print(header + (f" {'baseline wall':>13s} {'ratio':>6s}" if args.baseline else "") + "  heavy imports")
    totals = [0.0, 0.0, 0.0]
    for script in scripts:
        wall, cpu, heavy = measure(script_imports(script), REPO / "src", args.repeat)
        line = f"{script.stem:24s} {wall:7.2f} {cpu:7.2f}"
        totals[0] += wall
        totals[1] += cpu
        old = args.baseline / "workflow" / "scripts" / script.name if args.baseline else None
        if old is not None and old.is_file():
            old_wall, _, _ = measure(script_imports(old), args.baseline / "src", args.repeat)
            totals[2] += old_wall
            line += f" {old_wall:13.2f} {old_wall / wall:6.2f}"
        print(f"{line}  {heavy}")
    summary = f"{'total':24s} {totals[0]:7.2f} {totals[1]:7.2f}"
    print(summary + (f" {totals[2]:13.2f} {totals[2] / totals[0]:6.2f}" if args.baseline else ""))
    slowest = subprocess.run([sys.executable, "-X", "importtime", "-c", "import torch"], capture_output=True,
                             text=True).stderr.splitlines()[-1]
    print("for scale, `import torch` alone (-X importtime, cumulative us):",
          re.sub(r"\s+", " ", slowest.split("|")[1]).strip())


if __name__ == "__main__":
    main()
