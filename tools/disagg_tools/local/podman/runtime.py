"""Run planned pods with podman: the run's network, volumes, pods and containers, their
probes and hooks, and the removal of all of it.

I/O layer of ``disagg up --runtime podman`` (podman commands, files; each probe run by
the kubelet's prober), and the kubelet's podman container driver. Every object the run
creates carries the label ``disagg.dev/up-run=<run id>`` and is removed when the run
ends, however it ends (Ctrl-C included); a run whose ``disagg up`` was killed outright is
swept by the next one (:func:`sweep`). Each container runs attached (``podman run``, not
``-d``) as a supervised :class:`~disagg_tools.local.children.Child`, so its output is its
log, its exit is the container's, and a SIGTERM to it reaches the container
(``--sig-proxy``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import math
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from disagg_tools.local.children import Child, spawn, start_child, stop_children
from disagg_tools.local.kubelet import admit, prober
from disagg_tools.local.kubelet.rules import containers
from disagg_tools.local.kubelet.rules.probes import SUCCESS, Rule
from disagg_tools.local.rules import volumes
from disagg_tools.local.rules.podman import (
    RUN_LABEL,
    ContainerPlan,
    PodPlan,
    Probe,
    container_name,
    pod_create_argv,
    run_argv,
)

OWNER_LABEL = "disagg.dev/up-owner"  # the pid of the disagg up that made it
PODMAN_TIMEOUT_S = 120.0
SHM_ROOT = "/dev/shm"  # the host's tmpfs, for memory emptyDirs
FIRST_POD_HOST = 10  # pod addresses start at .10 of the run's subnet
EXEC_START_S = 5  # what a `podman exec` may take to start, on top of an exec probe's timeout
Say = Callable[[str], None]


class PodmanError(RuntimeError):
    """podman refused a step; the message has its command and error."""


def containers_conf() -> str | None:
    """The podman settings the project keeps (images/containers.conf), unless
    CONTAINERS_CONF names others; None outside a checkout (podman's own)."""
    if os.environ.get("CONTAINERS_CONF"):
        return os.environ["CONTAINERS_CONF"]
    here = Path(__file__).resolve()
    for parent in here.parents:
        conf = parent / "images" / "containers.conf"
        if conf.is_file() and (parent / "pyproject.toml").is_file():
            return str(conf)
    return None


def podman(
    *args: str, check: bool = True, timeout: float = PODMAN_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    conf = containers_conf()
    if conf:
        env["CONTAINERS_CONF"] = conf
    try:
        done = subprocess.run(
            ["podman", *args], env=env, capture_output=True, text=True, timeout=timeout
        )
    except FileNotFoundError:
        raise PodmanError(
            "podman is not installed: `make images` installs it (apt-get install podman runc)"
        ) from None
    except subprocess.TimeoutExpired:
        raise PodmanError(f"podman {' '.join(args[:3])} took over {timeout:g} s") from None
    if check and done.returncode != 0:
        raise PodmanError(f"podman {' '.join(args[:4])} ...: {done.stderr.strip()[-2000:]}")
    return done


def podman_env() -> dict[str, str]:
    """The environment a supervised ``podman run`` gets."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DISAGG_", "UCX_"))}
    conf = containers_conf()
    if conf:
        env["CONTAINERS_CONF"] = conf
    return env


def image_exists(image: str) -> bool:
    return podman("image", "exists", image, check=False).returncode == 0


def image_user(image: str) -> str:
    """The user an image runs as ("" for root by default)."""
    return podman("image", "inspect", "--format", "{{.Config.User}}", image).stdout.strip()


def sweep(say: Say) -> None:
    """Remove what earlier runs left whose ``disagg up`` is gone (killed with SIGKILL: its
    own cleanup never ran)."""
    owners: dict[str, set[str]] = {}
    for kind in ("pod", "network"):
        args = ("pod", "ps") if kind == "pod" else ("network", "ls")
        listed = podman(*args, "--format", "json", check=False).stdout
        try:
            items = json.loads(listed or "[]")
        except ValueError:
            continue
        for item in items or []:
            labels = item.get("Labels") or item.get("labels") or {}
            if RUN_LABEL in labels:
                owners.setdefault(labels.get(OWNER_LABEL, ""), set()).add(labels[RUN_LABEL])
    for owner, runs in owners.items():
        if owner.isdigit() and _alive(int(owner)):
            continue
        for run_id in runs:
            say(f"  removing what run {run_id} left (its disagg up is gone)")
            remove_run(run_id)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# what a run makes, in the order it is removed: (kind, list command, name format, remove)
KINDS = (
    ("pod", ("pod", "ps"), "{{.Name}}", ("pod", "rm", "--force", "--time", "0")),
    ("container", ("ps", "-a"), "{{.Names}}", ("rm", "--force", "--time", "0")),
    ("volume", ("volume", "ls"), "{{.Name}}", ("volume", "rm", "--force")),
    ("network", ("network", "ls"), "{{.Name}}", ("network", "rm", "--force")),
)


def _listed(listing: tuple[str, ...], name_format: str, run_id: str) -> list[str]:
    label = f"label={RUN_LABEL}={run_id}"
    return podman(*listing, "--filter", label, "--format", name_format, check=False).stdout.split()


def shm_folder(run_id: str) -> Path:
    """Where a run's memory emptyDirs live on the host's tmpfs."""
    return Path(SHM_ROOT, f"disagg-up-{run_id}")


def remove_run(run_id: str) -> list[str]:
    """Remove every pod, container, volume and network of ``run_id``, and its memory
    emptyDirs; what could not be removed (empty: nothing left)."""
    for _, listing, name_format, remove in KINDS:
        names = _listed(listing, name_format, run_id)
        if names:
            podman(*remove, *names, check=False)
    shutil.rmtree(shm_folder(run_id), ignore_errors=True)
    return left_behind(run_id)


def left_behind(run_id: str) -> list[str]:
    """What of ``run_id`` podman still has: "pod NAME", "container NAME", ..."""
    out = [
        f"{kind} {name}"
        for kind, listing, name_format, _ in KINDS
        for name in _listed(listing, name_format, run_id)
    ]
    shm = shm_folder(run_id)
    return [*out, f"folder {shm}"] if shm.exists() else out


class PodRuntime:
    """One run's podman objects: made by :meth:`network` and :meth:`make_pods`, containers
    started with :meth:`run`, probed with :meth:`check`, all stopped and removed with
    :meth:`remove`. It is also the kubelet's podman driver
    (:class:`~disagg_tools.local.kubelet.driver.Driver`): :meth:`create`, :meth:`start`,
    :meth:`stop`, :meth:`exec_argv` and :meth:`exec_env` act on one container of the run."""

    def __init__(self, tmp: Path, logs: Path, say: Say) -> None:
        self.run_id = uuid.uuid4().hex[:10]
        self.name = f"disagg-up-{self.run_id}"
        self.tmp, self.logs, self.say = tmp, logs, say
        self.children: dict[str, Child] = {}  # container name → its podman run
        self.pods: list[PodPlan] = []
        self.host_ip = ""
        self.shm = shm_folder(self.run_id)  # memory emptyDirs
        self._sources: dict[str, dict[str, str]] = {}  # pod → volume → podman source

    @property
    def labels(self) -> list[str]:
        return ["--label", f"{RUN_LABEL}={self.run_id}", "--label", f"{OWNER_LABEL}={os.getpid()}"]

    def network(self, count: int) -> list[str]:
        """Create the run's network; ``count`` pod addresses in it (the node's address,
        its gateway, is :attr:`host_ip`)."""
        podman("network", "create", *self.labels, self.name)
        found = json.loads(podman("network", "inspect", self.name).stdout)[0]
        subnet = found["subnets"][0]
        net = ipaddress.ip_network(subnet["subnet"])
        self.host_ip = subnet.get("gateway") or str(next(net.hosts()))
        hosts = list(net.hosts())[FIRST_POD_HOST - 1 :]
        if len(hosts) < count:
            raise PodmanError(f"network {self.name} ({net}) has no room for {count} pods")
        return [str(ip) for ip in hosts[:count]]

    def make_pods(self, pods: Sequence[PodPlan]) -> None:
        """Each pod's volumes (files written, tmpfs volumes made) and the pod itself."""
        for pod in pods:
            if podman("pod", "exists", pod.name, check=False).returncode == 0:
                raise PodmanError(_in_use(pod.name))
            # memory emptyDirs on the host's tmpfs, shared by the pod's containers (their
            # sizeLimit is not enforced; at /dev/shm the pod's own is)
            folder, memory = self.tmp / "pods" / pod.name, self.shm / pod.name
            admit.write_volumes(pod.volumes, folder, memory)
            sources = {v.name: volumes.source(v, str(folder), str(memory)) for v in pod.volumes}
            self._sources[pod.name] = sources
            podman(*pod_create_argv(pod, self.name, self.run_id), "--label",
                   f"{OWNER_LABEL}={os.getpid()}")  # fmt: skip
            self.pods.append(pod)

    def run(self, pod: PodPlan, c: ContainerPlan, log_name: str) -> Child:
        """Start container ``c`` of ``pod`` attached; its log is ``log_name``.log."""
        argv = ["podman", *run_argv(pod, c, self._sources[pod.name], self.run_id)]
        return self.create(log_name, argv, c.env, self.logs)

    # the kubelet's container runtime (kubelet.driver.Driver) over this run's containers

    def create(self, name: str, argv: Sequence[str], env: Mapping[str, str], logs: Path) -> Child:
        """``argv`` is a ``podman run`` of this run (:func:`run_argv`), the container's
        ``env`` already in it: the podman client itself gets :func:`podman_env`."""
        child = start_child(name, argv, podman_env(), logs)
        self.children[argv[list(argv).index("--name") + 1]] = child
        return child

    def start(self, child: Child) -> None:
        spawn(child)  # `podman run --replace`: the exited container gives way

    def stop(
        self, children: Sequence[Child], grace_s: float, sig: signal.Signals = signal.SIGTERM
    ) -> None:
        """``sig`` to each attached client, which passes it to its container
        (``--sig-proxy``) and exits with the container's status, SIGKILL at the end of
        ``grace_s``; then ``podman kill`` of those containers, for what a killed client
        (SIGKILL is not passed on) left running."""
        stop_children(children, grace_s, sig)
        names = [n for n, child in self.children.items() if any(child is c for c in children)]
        if names:
            podman("kill", *names, check=False)

    def exec_argv(
        self, run: containers.PodRun, process: containers.Process, command: Sequence[str]
    ) -> list[str]:
        return ["podman", "exec", f"{run.name}-{process.container}", *command]

    def exec_env(self, env: Mapping[str, str]) -> dict[str, str]:
        return podman_env()  # the container's own env is the container's, inside it

    def child(self, pod: PodPlan, c: ContainerPlan) -> Child:
        """The supervised ``podman run`` of container ``c`` of ``pod``."""
        return self.children[container_name(pod, c)]

    def check(self, pod: PodPlan, c: ContainerPlan, probe: Probe) -> bool:
        """One run of ``probe`` against container ``c``: the kubelet's prober
        (:func:`~disagg_tools.local.kubelet.prober.attempt`, HTTP and TCP from this host to
        the pod's IP, an exec through this driver)."""
        if probe.kind == "sleep":
            return True
        run = containers.PodRun(pod.name, pod.namespace, pod.ip, [], pod.grace_s)
        process = containers.Process(c.name, [], dict(c.env), {"name": c.name})
        return asyncio.run(_attempt(run, process, kubelet_rule(probe), self)) == SUCCESS

    def wait_ready(
        self, pod: PodPlan, c: ContainerPlan, child: Child, timeout_s: float, say: Say
    ) -> float:
        """Block until ``c``'s startup probe (if any) and readiness probe pass; seconds it
        took. Raises PodmanError with its log tail when it exits or the time is up."""
        t0 = time.monotonic()
        gates = [p for p in (c.startup, c.readiness) if p is not None]
        if c.startup is not None:
            budget = c.startup.initial_delay_s + c.startup.period_s * c.startup.failure_threshold
            timeout_s = max(timeout_s, budget)
        next_note = t0 + 15.0
        for probe in gates:
            time.sleep(min(probe.initial_delay_s, 1.0))
            while not self.check(pod, c, probe):
                if child.proc.poll() is not None:
                    raise PodmanError(
                        f"{container_name(pod, c)} exited ({child.proc.returncode}) before it "
                        f"was ready; last log lines:\n{child.log_tail(25)}"
                    )
                now = time.monotonic()
                if now - t0 > timeout_s:
                    raise PodmanError(
                        f"{container_name(pod, c)} not ready after {timeout_s:g} s "
                        f"({probe.describe()}); last log lines:\n{child.log_tail(25)}"
                    )
                if now >= next_note:
                    say(
                        f"  waiting {container_name(pod, c)}: {now - t0:.0f} s ({probe.describe()})"
                    )
                    next_note = now + 15.0
                time.sleep(min(probe.period_s, 1.0))
        return time.monotonic() - t0

    def remove(self, hurry: threading.Event) -> list[str]:
        """Stop and remove everything: each running container's preStop hook first (in
        parallel, each bounded by its pod's grace period; ``hurry`` set skips the rest of
        the wait), then SIGTERM (``podman stop``, SIGKILL after what is left of the grace
        period), then every pod, volume and the network. What is left (empty: nothing)."""
        t0 = time.monotonic()
        hooks = [
            (pod, c)
            for pod in self.pods
            for c in pod.containers
            if c.pre_stop is not None and self._running(pod, c)
        ]
        if hooks:
            longest = max(pod.grace_s for pod, _ in hooks)
            self.say(
                f"stopping: {len(hooks)} preStop hook(s), up to {longest:g} s "
                "(the pods' grace periods; Ctrl-C again skips the wait)"
            )
            threads = [
                threading.Thread(target=self._pre_stop, args=(pod, c), daemon=True)
                for pod, c in hooks
            ]
            for t in threads:
                t.start()
            for t in threads:
                while t.is_alive() and not hurry.is_set() and time.monotonic() - t0 < longest:
                    t.join(0.2)
        stops = []
        for pod in self.pods:
            rest = 0 if hurry.is_set() else max(0, int(pod.grace_s - (time.monotonic() - t0)))
            stops.append(
                threading.Thread(
                    target=podman,
                    args=("pod", "stop", "--time", str(rest), pod.name),
                    kwargs={"check": False},
                    daemon=True,
                )
            )
        for t in stops:
            t.start()
        for t in stops:
            t.join(PODMAN_TIMEOUT_S)
        left = remove_run(self.run_id)
        shutil.rmtree(self.tmp / "pods", ignore_errors=True)
        return left

    def _running(self, pod: PodPlan, c: ContainerPlan) -> bool:
        child = self.children.get(container_name(pod, c))
        return child is not None and child.proc.poll() is None

    def _pre_stop(self, pod: PodPlan, c: ContainerPlan) -> None:
        hook = c.pre_stop
        if hook is None:
            return
        if hook.kind == "sleep":
            time.sleep(hook.seconds)
        elif hook.kind == "exec":
            with contextlib.suppress(PodmanError):
                podman("exec", container_name(pod, c), *hook.command, check=False,
                       timeout=pod.grace_s)  # fmt: skip
        else:
            self.check(pod, c, Probe(hook.kind, hook.port, hook.path, timeout_s=pod.grace_s))


def _in_use(pod: str) -> str:
    found = podman("pod", "inspect", pod, check=False).stdout
    try:
        info = json.loads(found)
        labels = (info[0] if isinstance(info, list) else info).get("Labels") or {}
    except (ValueError, IndexError, AttributeError):
        labels = {}
    owner = labels.get(OWNER_LABEL)
    who = f"the disagg up with pid {owner}" if owner else "something else"
    return (
        f"pod {pod} already exists, made by {who}: stop that run first "
        f"(or remove it: podman pod rm -f {pod})"
    )


def describe_images(mapping: Mapping[str, str]) -> Iterable[str]:
    for rendered, local in mapping.items():
        yield f"  image {rendered}" + ("" if rendered == local else f" → {local} (built here)")


def kubelet_rule(probe: Probe) -> Rule:
    """A planned probe as the kubelet's prober takes it (its timing is the caller's). An
    exec gets ``EXEC_START_S`` on top of its timeout: the ``podman exec`` client's own
    start, which a kubelet's CRI exec does not pay."""
    action: dict[str, Any]
    timeout = max(1, math.ceil(probe.timeout_s))
    if probe.kind == "http":
        action = {"httpGet": {"port": probe.port, "path": probe.path}}
    elif probe.kind == "tcp":
        action = {"tcpSocket": {"port": probe.port}}
    else:
        action, timeout = {"exec": {"command": list(probe.command)}}, timeout + EXEC_START_S
    return Rule(probe.kind, action, timeout=timeout)


async def _attempt(
    run: containers.PodRun, process: containers.Process, rule: Rule, driver: PodRuntime
) -> str:
    async with aiohttp.ClientSession() as http:  # no proxy: pod IPs are this host's
        return await prober.attempt(
            http, run, process, rule, driver.exec_env(process.env), driver=driver
        )
