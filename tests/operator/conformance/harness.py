"""What every conformance case uses: the case registry, a fresh test API
server with its kubeconfig, kubectl, helm and Python-client helpers, and
bounded waits (a hang fails the case, never CI)."""

import json
import os
import select
import shutil
import subprocess
import tempfile
import threading

# Seconds any one client call may take.
CALL_TIMEOUT = 20
# Exit code for "skipped" (ctest's SKIP_RETURN_CODE): a client is not installed.
SKIPPED = 77

GROUP, VERSION, PLURAL = "easyscale.io", "v1alpha1", "easyscalejobs"

CASES = []


def case(action, expected, gap=False, server_flags=(), cluster=False, timeout=90):
    """Registers a case: the table's action and expected columns, the server's flags.
    cluster: the case runs a whole test cluster of its own (fn gets the parsed
    arguments, not a server); timeout: ctest's, in seconds."""

    def register(fn):
        CASES.append({"name": fn.__name__, "action": action, "expected": expected,
                      "gap": gap, "server_flags": server_flags, "cluster": cluster,
                      "timeout": timeout, "run": fn})
        return fn

    return register


class Failed(Exception):
    pass


class Skipped(Exception):
    """The case cannot run here (what it needs is not built, or not root)."""


def check(cond, what):
    if not cond:
        raise Failed(what)


def job(name, max_workers=2, labels=None):
    meta = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "EasyScaleJob", "metadata": meta,
            "spec": {"image": "easyscale/worker:test", "ests": 8, "maxWorkers": max_workers}}


def source_path(*parts):
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", *parts)


def yaml_files(folder):
    return sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".yaml"))


class Server:
    """One easyscale-test-apiserver process and a kubeconfig for it."""

    def __init__(self, binary, kubectl, extra_flags=()):
        self.dir = tempfile.mkdtemp(prefix="conformance_")
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        self.kubectl_bin = kubectl
        self.proc = subprocess.Popen(
            [binary, "--tls", "--token", "conformance-token", "--kubeconfig", self.kubeconfig,
             *extra_flags],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 10)
        check(ready, "the test API server did not print its URL within 10 s")
        self.url = self.proc.stdout.readline().strip()
        check(self.url.startswith("https://"), f"the test API server printed {self.url!r}")

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        check(self.proc.returncode == 0,
              f"the test API server ended with {self.proc.returncode}: {self.proc.stderr.read()}")
        shutil.rmtree(self.dir, ignore_errors=True)

    def kubectl_args(self, *args):
        return [self.kubectl_bin, "--kubeconfig", self.kubeconfig, "--request-timeout=10s",
                *args]

    def kubectl(self, *args, stdin=None, ok=True):
        """Runs kubectl; with ok, fails the case unless it exits 0. Returns (rc, out, err)."""
        p = subprocess.run(self.kubectl_args(*args), input=stdin, capture_output=True, text=True,
                           timeout=CALL_TIMEOUT)
        if ok:
            check(p.returncode == 0, f"kubectl {' '.join(args)}: exit {p.returncode}: {p.stderr}")
        return p.returncode, p.stdout, p.stderr

    def kubectl_json(self, *args):
        return json.loads(self.kubectl(*args, "-o", "json")[1])

    def apply(self, obj, *flags, validate=False, ok=True):
        """kubectl apply; by default without kubectl's validation (the cases of it say so)."""
        return self.kubectl("apply", *flags, *(() if validate else ("--validate=false",)), "-f",
                            "-", stdin=json.dumps(obj), ok=ok)

    def helm(self, *args):
        """Runs helm (next to kubectl, from the same npm package); fails the case unless it exits 0."""
        helm = os.path.join(os.path.dirname(self.kubectl_bin), "helm")
        p = subprocess.run([helm, "--kubeconfig", self.kubeconfig, *args], capture_output=True,
                           text=True, timeout=60)
        check(p.returncode == 0, f"helm {' '.join(args)}: exit {p.returncode}: {p.stderr}")
        return p.stdout

    def python_client(self):
        from kubernetes import client, config
        config.load_kube_config(config_file=self.kubeconfig)
        return client.CustomObjectsApi(), client.CoreV1Api()


class LineReader:
    """The stdout lines of a long-running command, read with deadlines."""

    def __init__(self, args):
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.lines = []
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()

    def wait_for(self, count, seconds):
        """The first `count` lines, once there are that many; fails after `seconds`."""
        with self.cond:
            self.cond.wait_for(lambda: len(self.lines) >= count, timeout=seconds)
            check(len(self.lines) >= count,
                  f"{count} lines expected within {seconds} s, got {self.lines}")
            return list(self.lines[:count])

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        return self.proc.stderr.read()


def with_timeout(seconds, fn):
    """Runs fn in a thread; fails when it does not return within `seconds`."""
    result = {}

    def run():
        try:
            result["value"] = fn()
        except BaseException as e:  # handed to the caller
            result["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    check(not t.is_alive(), f"the client call did not return within {seconds} s")
    if "error" in result:
        raise result["error"]
    return result["value"]
