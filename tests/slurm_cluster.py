"""A single-node SLURM on localhost for the tests: munged, slurmctld and slurmd started and stopped by PID.

Needs root (slurm.conf must sit at /etc/slurm/slurm.conf: a job step does not see SLURM_CONF) and the Debian
packages slurmctld, slurmd, slurm-client and munge. Everything else (munge key and socket, state, spool, logs)
lives in a temporary folder. A fake GPU (GRES gpu:h100:1 backed by /dev/null) lets GPU rules ask for `gpu: 1`.
A machine holds one such cluster: `one_cluster_at_a_time` is the lock the `cluster` fixture (tests/conftest.py)
holds for its lifetime. And what both SLURM test modules use: the profile's command line, the jobs slurmctld knows
and the rules each ran (one, or a group's).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from workflow_helpers import REPO, held_lock, rule_blocks, snakemake_command

SLURM_CONF = Path("/etc/slurm/slurm.conf")
GRES_CONF = Path("/etc/slurm/gres.conf")
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scancel", "sinfo")
NODE = "localhost"
GPU_PARTITION, CPU_PARTITION = "test-gpu", "test-cpu"
MACHINE_LOCK = Path(tempfile.gettempdir()) / "oversmooth-local-slurm.lock"

CLUSTER_OVERRIDE = f"""\
resources:
  train_gpus: 1
  inference_gpus: 1
  gpu_model: h100
  gpu_partition: {GPU_PARTITION}
  cpu_partition: {CPU_PARTITION}
  mem_mb: {{train: 2000, inference: 2000, cpu: 1500}}
  runtime_min: {{train: 30, inference: 30, cpu: 30}}
"""
# No accounting database here: query squeue, submit without an account, look soon after submitting.
NO_ACCOUNTING = ["--slurm-no-account", "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "2"]
# A group's layer no wider than the node (the profile's group_cpus is a real node's); the profile's groups' names
NODE_GROUPS = ["--resources", f"group_cpus={os.cpu_count() or 1}"]
PROFILE_GROUPS = tuple(yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
                       .get("group-components", {}))


def missing_requirements() -> str | None:
    """Why a local SLURM cannot be stood up here, or None when it can."""
    if os.geteuid() != 0:
        return "needs root, to write /etc/slurm/slurm.conf"
    search = os.environ.get("PATH", "") + os.pathsep + "/usr/sbin:/sbin"
    missing = [tool for tool in DAEMONS + CLIENTS if shutil.which(tool, path=search) is None]
    if missing:
        return f"missing {', '.join(missing)} (Debian packages slurmctld slurmd slurm-client munge)"
    return None


def _daemon(name: str) -> str:
    return shutil.which(name, path=os.environ.get("PATH", "") + os.pathsep + "/usr/sbin:/sbin") or name


def node_memory_mb() -> int:
    """What slurmd detects (RealMemory), less a margin so that the node is never marked as having too little."""
    out = subprocess.run([_daemon("slurmd"), "-C"], capture_output=True, text=True, check=True).stdout
    fields = dict(item.split("=", 1) for item in out.split() if "=" in item)
    return int(int(fields["RealMemory"]) * 0.9)


def slurm_conf(folder: Path, cpus: int, memory_mb: int) -> str:
    """slurm.conf for one node with both partitions, no accounting database, squeue-friendly MinJobAge."""
    return "\n".join([
        "ClusterName=oversmooth-test",
        f"SlurmctldHost={NODE}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        f"AuthInfo=socket={folder / 'munge.socket'}",
        "CredType=cred/munge",
        f"StateSaveLocation={folder / 'state'}",
        f"SlurmdSpoolDir={folder / 'spool'}",
        f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
        f"SlurmdPidFile={folder / 'slurmd.pid'}",
        f"SlurmctldLogFile={folder / 'slurmctld.log'}",
        f"SlurmdLogFile={folder / 'slurmd.log'}",
        "SlurmctldPort=16817",
        "SlurmdPort=16818",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "MpiDefault=none",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU_Memory",
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/none",
        "ReturnToService=2",
        "MinJobAge=3600",  # squeue (the status command) and the tests must still see finished jobs
        "KillWait=30",  # SIGTERM, then this long before SIGKILL: time for a training job to save its state
        "GresTypes=gpu",
        f"NodeName={NODE} CPUs={cpus} RealMemory={memory_mb} Gres=gpu:h100:1 State=UNKNOWN",
        f"PartitionName={CPU_PARTITION} Nodes={NODE} Default=YES MaxTime=INFINITE State=UP",
        f"PartitionName={GPU_PARTITION} Nodes={NODE} Default=NO MaxTime=INFINITE State=UP",
        "",
    ])


@dataclass
class LocalSlurm:
    """The running daemons of a one-node cluster; `stop()` ends them and restores /etc/slurm."""

    folder: Path
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    saved: dict[Path, bytes | None] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "PATH": os.environ.get("PATH", "") + os.pathsep + "/usr/sbin:/sbin"}

    def start(self, timeout: float = 60.0) -> LocalSlurm:
        for sub in ("state", "spool"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        key = self.folder / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
        self._install(SLURM_CONF, slurm_conf(self.folder, os.cpu_count() or 1, node_memory_mb()))
        self._install(GRES_CONF, f"NodeName={NODE} Name=gpu Type=h100 File=/dev/null\n")
        self._spawn("munged", "-F", "--force", f"--key-file={key}", f"--socket={self.folder / 'munge.socket'}",
                    f"--pid-file={self.folder / 'munged.pid'}", f"--log-file={self.folder / 'munged.log'}",
                    f"--seed-file={self.folder / 'munged.seed'}")
        self._wait(lambda: (self.folder / "munge.socket").exists(), timeout, "munged socket")
        self._spawn("slurmctld", "-D", "-c", "-i")
        self._wait(lambda: self._ok("sinfo"), timeout, "slurmctld answering sinfo")
        self._spawn("slurmd", "-D", "-N", NODE)
        self._wait(self._node_idle, timeout, f"node {NODE} idle")
        return self

    def stop(self) -> None:
        for name in reversed(DAEMONS):
            process = self.processes.pop(name, None)
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        for path, content in self.saved.items():
            if content is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(content)
        self.saved.clear()

    def logs(self) -> str:
        """The daemons' logs, for a failure message."""
        parts = []
        for name in DAEMONS:
            log = self.folder / f"{name}.log"
            if log.exists():
                parts.append(f"--- {log}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-40:]))
        return "\n".join(parts)

    def _install(self, path: Path, text: str) -> None:
        if path not in self.saved:
            self.saved[path] = path.read_bytes() if path.exists() else None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def _spawn(self, name: str, *args: str) -> None:
        with open(self.folder / f"{name}.out", "wb") as out:  # the child keeps its own copy of the descriptor
            self.processes[name] = subprocess.Popen([_daemon(name), *args], stdout=out, stderr=subprocess.STDOUT,
                                                    env=self.env, start_new_session=True)

    def _ok(self, *cmd: str) -> bool:
        return subprocess.run(cmd, capture_output=True, env=self.env, check=False).returncode == 0

    def _node_idle(self) -> bool:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True, env=self.env, check=False)
        return out.returncode == 0 and out.stdout.strip().startswith("idle")

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"{name} exited with {process.returncode} while waiting for {what}\n"
                                       + (self.folder / f"{name}.out").read_text(errors="replace") + self.logs())
            if ready():
                return
            time.sleep(0.5)
        raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}\n{self.logs()}")


def one_cluster_at_a_time(timeout_s: float = 1800.0, lock: Path = MACHINE_LOCK) -> AbstractContextManager[None]:
    """Hold the machine's one local SLURM for a block (its slurm.conf and ports are fixed): a second pytest worker
    or session waits there until the first one's cluster has stopped; TimeoutError naming the lock after `timeout_s`."""
    return held_lock(lock, timeout_s, "another local SLURM")


def profile_command(workdir: Path, *targets: str, overrides=(), timeout_s: int) -> list[str]:
    """`snakemake --profile profiles/slurm` on the smoke config; SIGINT after `timeout_s` so a hang fails the test."""
    override = workdir / "cluster.yaml"
    override.write_text(CLUSTER_OVERRIDE)
    command = snakemake_command(workdir, "--profile", str(REPO / "profiles" / "slurm"), *NODE_GROUPS, *NO_ACCOUNTING,
                                *targets, overrides=[override, *overrides])
    return ["timeout", "-s", "INT", str(timeout_s), *command]


def slurm_jobs(cluster: LocalSlurm) -> list[dict[str, str]]:
    """Every job slurmctld still knows (MinJobAge keeps finished ones), as `scontrol -o show job` fields."""
    out = subprocess.run(["scontrol", "-o", "show", "job"], capture_output=True, text=True, env=cluster.env,
                         check=True).stdout
    jobs = [dict(re.findall(r"(\w+)=(\S*)", line)) for line in out.splitlines()]
    return [job for job in jobs if "JobId" in job]  # none: "No jobs in the system"


def rule_of(job: dict[str, str]) -> str:
    """The rule name from the plugin's job comment (`rule_<name>` or `rule_<name>_wildcards_<values>`)."""
    return job["Comment"].removeprefix("rule_").split("_wildcards_")[0]


def group_of(job: dict[str, str]) -> str | None:
    """The profile's group a SLURM job ran (the plugin's comment `rule_<group>_<rules>`), None for a job alone."""
    comment = job["Comment"].removeprefix("rule_")
    return next((name for name in PROFILE_GROUPS if comment.startswith(f"{name}_")), None)


def rules_of(job: dict[str, str]) -> list[str]:
    """The rules a SLURM job ran: its rule, or its group's (joined by "_" in the comment, in name order, five at
    most, then "...")."""
    group = group_of(job)
    if group is None:
        return [rule_of(job)]
    names = sorted({name for _, name, _, _ in rule_blocks()}, key=len, reverse=True)
    rest, rules = job["Comment"].removeprefix(f"rule_{group}_"), []
    while rest and rest != "...":
        rule = next(name for name in names if rest == name or rest.startswith(f"{name}_"))
        rules.append(rule)
        rest = rest.removeprefix(rule).removeprefix("_")
    return rules


def wildcards_of(job: dict[str, str]) -> str:
    return job["Comment"].split("_wildcards_")[1] if "_wildcards_" in job["Comment"] else ""
