"""Conformance cases driven by kubectl."""

import json
import os
import re
import subprocess
import time

from harness import (GROUP, PLURAL, VERSION, Failed, LineReader, case, check, job, source_path,
                     yaml_files)


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
      "the CRD's printer columns (Phase, ESTs, Workers, GPU types, Step, Progress, ETA, Certified, "
      "Preemptions, Age); "
      "a status change shows as a new row within 5 s")
def kubectl_get_printer_columns(s):
    s.apply(job("t"))
    s.kubectl("patch", "esj", "t", "--subresource=status", "--type=merge", "-p",
              '{"status":{"phase":"Running","workerCount":2,"gpuTypes":"cpu:2","step":10,'
              '"progressPercentage":8,"estimatedRemainingSeconds":95,"preemptions":0}}')
    lines = s.kubectl("get", "esj")[1].splitlines()
    check(lines[0].split() == ["NAME", "PHASE", "ESTS", "WORKERS", "GPU", "TYPES", "STEP",
                               "PROGRESS", "ETA", "CERTIFIED", "PREEMPTIONS", "AGE"], lines)
    check(lines[1].split()[:9] == ["t", "Running", "8", "2", "cpu:2", "10", "8", "95", "0"],
          lines)
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
      "400: strict decoding error: unknown field \"spec.training.stepz\"")
def kubectl_apply_unknown_field(s):
    bad = job("typo")
    bad["spec"]["training"] = {"stepz": 10}
    rc, _, err = s.apply(bad, validate=True, ok=False)
    check(rc != 0 and 'unknown field "spec.training.stepz"' in err,
          f"kubectl apply: exit {rc}; the job was stored with the unknown field")


@case("`kubectl explain easyscalejob.spec`, `explain esj.spec.ests` (and suspend, a status field)",
      "the CRD's descriptions, types and required fields")
def kubectl_explain(s):
    out = s.kubectl("explain", "easyscalejob.spec")[1]
    check("What to train and on which resources it may run." in out, out)
    check("ests\t<integer> -required-" in out and "image\t<string> -required-" in out, out)
    out = s.kubectl("explain", "esj.spec.ests")[1]
    check("Number of EasyScaleThreads" in out and "FIELD: ests <integer>" in out, out)
    out = s.kubectl("explain", "esj.spec.suspend")[1]
    check("FIELD: suspend <boolean>" in out and "kueue.x-k8s.io/queue-name" in out, out)
    out = s.kubectl("explain", "esj.status.estimatedRemainingSeconds")[1]
    check("measured" in out, out)


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
      "each rejected by the server (the CRD's schema and rules)")
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


@case("`kubectl apply -f` of a job with spec.ests changed",
      "422: spec.ests: Invalid value: \"integer\": ests is immutable (the CRD's CEL "
      "transition rule); the job unchanged")
def kubectl_apply_ests_immutable(s):
    s.apply(job("imm"), validate=True)
    changed = job("imm")
    changed["spec"]["ests"] = 16
    rc, _, err = s.apply(changed, validate=True, ok=False)
    check(rc != 0 and 'spec.ests: Invalid value: "integer": ests is immutable' in err, err)
    check(s.kubectl_json("get", "esj", "imm")["spec"]["ests"] == 8, "ests changed")


@case("`kubectl patch esj --subresource=status` with an invalid status "
      "(workerCount -3, phase not in the enum, status not an object)",
      "422 with each cause (status.workerCount, status.phase; status); a valid status is "
      "written")
def kubectl_patch_status_invalid(s):
    s.apply(job("st"))
    rc, _, err = s.kubectl("patch", "esj", "st", "--subresource=status", "--type=merge", "-p",
                           '{"status":{"workerCount":-3,"phase":"Dancing"}}', ok=False)
    check(rc != 0 and "is invalid" in err and "status.workerCount: Invalid value: -3" in err
          and 'status.phase: Unsupported value: "Dancing"' in err, err)
    rc, _, err = s.kubectl("patch", "esj", "st", "--subresource=status", "--type=merge", "-p",
                           '{"status":"notanobject"}', ok=False)
    check(rc != 0 and "status: Invalid value" in err, err)
    s.kubectl("patch", "esj", "st", "--subresource=status", "--type=merge", "-p",
              '{"status":{"workerCount":3,"phase":"Running"}}')
    st = s.kubectl_json("get", "esj", "st")["status"]
    check(st == {"workerCount": 3, "phase": "Running"}, st)


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
    # The CRD's defaults are shown too, which widens describe's columns.
    check(re.search(r"Max Workers:\s+2\n", out), out)
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
    # The CRD requires each condition's reason, message and lastTransitionTime.
    kubectl_wait_for_status(s, "condition=Ready", {"conditions": [{
        "type": "Ready", "status": "True", "reason": "Training", "message": "workers run",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]})


@case("`kubectl wait --for=delete`", "ends once the job is deleted")
def kubectl_wait_delete(s):
    s.apply(job("x"))
    kubectl_wait_until(s, "x", "delete",
                       lambda: s.kubectl("delete", "esj", "x", "--wait=false"))


@case("`kubectl cordon`, `kubectl drain --force --grace-period=0`, `kubectl uncordon` of a node "
      "with a bare pod on it",
      "the node unschedulable (a strategic merge patch); the pod evicted through pods/eviction "
      "(found in discovery) and gone; the node schedulable again")
def kubectl_drain(s):
    s.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    s.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare", "namespace": "default"},
             "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]}})
    s.kubectl("cordon", "n1")
    check(s.kubectl_json("get", "node", "n1")["spec"].get("unschedulable") is True, "not cordoned")
    _, out, err = s.kubectl("drain", "n1", "--force", "--grace-period=0", "--timeout=30s")
    check("pod/bare evicted" in out + err and "node/n1 drained" in out + err, out + err)
    rc, _, err = s.kubectl("get", "pod", "bare", ok=False)
    check(rc != 0 and "NotFound" in err, err)
    s.kubectl("uncordon", "n1")
    check(not s.kubectl_json("get", "node", "n1")["spec"].get("unschedulable"), "still cordoned")
