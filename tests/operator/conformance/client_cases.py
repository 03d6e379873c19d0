"""Conformance cases driven by helm and by the official Python client."""

import json
import threading

from harness import GROUP, PLURAL, VERSION, Failed, case, check, job, source_path, with_timeout

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


def create_job_then_list_rv(jobs, name):
    """Creates the job `name`; the resourceVersion of a list made just after."""
    jobs.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, job(name))
    listed = jobs.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL)
    return listed["metadata"]["resourceVersion"]


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
    rv = create_job_then_list_rv(jobs, "r")
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
    rv = create_job_then_list_rv(jobs, "b")
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
      "created with the field pruned (and a Warning header)")
def python_unknown_field_pruned(s):
    jobs, _ = s.python_client()
    bad = job("typo")
    bad["spec"]["maxWorker"] = 2
    _, code, headers = jobs.create_namespaced_custom_object_with_http_info(
        GROUP, VERSION, "default", PLURAL, bad)
    made = jobs.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "typo")
    check(code == 201 and "maxWorker" not in made["spec"],
          f"stored with the unknown field: {made['spec']}")
    warning = headers.get("Warning", "")
    check(warning == '299 - "unknown field \\"spec.maxWorker\\""', f"Warning: {warning!r}")


@case("Python client: `replace_namespaced_custom_object_status` with `status: \"notanobject\"`, "
      "then `workerCount: -3`",
      "ApiException(422) with the cause's field (status, status.workerCount); nothing written")
def python_status_invalid(s):
    from kubernetes.client.rest import ApiException
    jobs, _ = s.python_client()
    made = jobs.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, job("st"))
    for status, field in (("notanobject", "status"), ({"workerCount": -3}, "status.workerCount")):
        made["status"] = status
        try:
            jobs.replace_namespaced_custom_object_status(GROUP, VERSION, "default", PLURAL, "st",
                                                         made)
            raise Failed(f"status {status!r} was written")
        except ApiException as e:
            body = json.loads(e.body)
            check(e.status == 422 and [c["field"] for c in body["details"]["causes"]] == [field],
                  e.body)
    stored = jobs.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "st")
    check("status" not in stored, stored)


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
