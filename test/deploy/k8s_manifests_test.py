#!/usr/bin/env python3
"""The Kubernetes deployment (deploy/kubernetes/): every manifest parses, has known kinds and
apiVersions, the webhook configuration fails open with a timeout, each webhook's
namespaceSelector (evaluated with Kubernetes' LabelSelector semantics) selects exactly the
namespaces labelled for its mode, every flag the manifests pass to `rightsize` is one its
--help lists, and the Helm chart's templates, rendered with values.yaml, are the plain
manifests.

Helm is not packaged in Debian 12, so the chart is rendered here by substituting
{{ .Values.x.y }} (the only template syntax the chart uses; anything else fails the test).

Usage: k8s_manifests_test.py RIGHTSIZE_BINARY SOURCE_DIR [--write]
  --write  regenerate the plain manifests from the chart (after editing the chart)."""
import os
import re
import subprocess
import sys

import yaml

RS, SRC = sys.argv[1], sys.argv[2]
WRITE = "--write" in sys.argv[3:]
DEPLOY = os.path.join(SRC, "deploy", "kubernetes")
CHART = os.path.join(DEPLOY, "helm", "rightsize")
FAILED = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        FAILED.append(what)


# --- Helm: the minimal renderer ------------------------------------------------------------
VALUE_REF = re.compile(r"\{\{\s*\.Values\.([A-Za-z0-9_.]+)\s*\}\}")


def render(text, values):
    def value(m):
        v = values
        for part in m.group(1).split("."):
            if not isinstance(v, dict) or part not in v:
                raise KeyError(f"{{{{ .Values.{m.group(1)} }}}} is not in values.yaml")
            v = v[part]
        return str(v)

    out = VALUE_REF.sub(value, text)
    if "{{" in out:
        raise ValueError("template syntax other than {{ .Values.x }}: " +
                         out[out.index("{{"):][:60])
    return out


values = yaml.safe_load(open(os.path.join(CHART, "values.yaml")))
chart = yaml.safe_load(open(os.path.join(CHART, "Chart.yaml")))
check(chart.get("apiVersion") == "v2" and chart.get("name") == "rightsize",
      "Chart.yaml is a Helm v2 chart named rightsize")
templates = sorted(f for f in os.listdir(os.path.join(CHART, "templates")) if f.endswith(".yaml"))
check(len(templates) >= 5, f"the chart has its templates ({', '.join(templates)})")
for name in templates:
    rendered = render(open(os.path.join(CHART, "templates", name)).read(), values)
    plain_path = os.path.join(DEPLOY, name)
    if WRITE:
        with open(plain_path, "w") as f:
            f.write("# Generated from helm/rightsize/templates/" + name + " with its values.yaml "
                    "(test/deploy/k8s_manifests_test.py --write); edit the chart, not this file.\n")
            f.write(rendered)
    plain = open(plain_path).read() if os.path.exists(plain_path) else ""
    check(list(yaml.safe_load_all(rendered)) == list(yaml.safe_load_all(plain)),
          f"helm template {name} with values.yaml equals deploy/kubernetes/{name}")

# --- Every plain manifest: kinds and apiVersions -------------------------------------------
API = {"Namespace": "v1", "ServiceAccount": "v1", "Service": "v1",
       "PersistentVolumeClaim": "v1", "Secret": "v1",
       "ClusterRole": "rbac.authorization.k8s.io/v1",
       "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
       "Deployment": "apps/v1", "DaemonSet": "apps/v1",
       "MutatingWebhookConfiguration": "admissionregistration.k8s.io/v1"}
objects = []
for name in sorted(f for f in os.listdir(DEPLOY) if f.endswith(".yaml")):
    for doc in yaml.safe_load_all(open(os.path.join(DEPLOY, name))):
        if doc is None:
            continue
        objects.append(doc)
        kind = doc.get("kind")
        check(API.get(kind) == doc.get("apiVersion"),
              f"{name}: {kind} {doc['metadata']['name']} has apiVersion {doc.get('apiVersion')}")
        if kind not in ("Namespace", "ClusterRole", "ClusterRoleBinding",
                        "MutatingWebhookConfiguration"):
            check(doc["metadata"].get("namespace") == "rightsize",
                  f"{kind} {doc['metadata']['name']} is in namespace rightsize")
by_kind = {}
for o in objects:
    by_kind.setdefault(o["kind"], []).append(o)
for kind in ("Namespace", "Deployment", "Service", "DaemonSet", "ServiceAccount", "ClusterRole",
             "ClusterRoleBinding", "PersistentVolumeClaim", "MutatingWebhookConfiguration"):
    check(kind in by_kind, f"the deployment has a {kind}")

# --- Server and Service ----------------------------------------------------------------------
service = by_kind["Service"][0]
port = service["spec"]["ports"][0]
check(port["port"] == 443 and port["targetPort"] == 8443, "Service rightsize: 443 -> 8443")
server = by_kind["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]
check(any(p["containerPort"] == 8443 for p in server["ports"]), "server listens on 8443")
# Without --config the server answers anyone who reaches its Service as an admin.
check("--config" in server["args"] and any(
    v.get("secret", {}).get("secretName") == "rightsize-config"
    for v in by_kind["Deployment"][0]["spec"]["template"]["spec"]["volumes"]),
      "server runs with an access config (agent tokens) from Secret rightsize-config")
check(service["spec"]["selector"].items() <=
      by_kind["Deployment"][0]["spec"]["template"]["metadata"]["labels"].items(),
      "the Service selects the server's pods")

# --- Agent: read-only host mounts, hostPID, GPUs, tolerations, RBAC -------------------------
ds = by_kind["DaemonSet"][0]["spec"]["template"]["spec"]
agent = ds["containers"][0]
check(ds.get("hostPID") is True, "agent runs with hostPID")
check(bool(ds.get("tolerations")), "agent tolerates tainted (GPU) nodes")
env = {e["name"]: e.get("value") for e in agent["env"]}
check(env.get("NVIDIA_VISIBLE_DEVICES") == "all", "agent sees every GPU (NVIDIA_VISIBLE_DEVICES)")
host_volumes = {v["name"]: v["hostPath"]["path"] for v in ds["volumes"] if "hostPath" in v}
for path in ("/sys/fs/cgroup", "/proc", "/var/log/pods", "/var/lib/kubelet/pod-resources"):
    check(path in host_volumes.values(), f"agent mounts host {path}")
for m in agent["volumeMounts"]:
    if m["name"] in host_volumes:
        check(m.get("readOnly") is True, f"host {host_volumes[m['name']]} is mounted read-only")
rules = by_kind["ClusterRole"][0]["rules"]
check(rules == [{"apiGroups": [""], "resources": ["nodes/proxy", "nodes/pods"], "verbs": ["get"]}],
      "agent's ClusterRole: GET nodes/proxy and nodes/pods only")
check(by_kind["ClusterRoleBinding"][0]["subjects"][0]["name"] == ds["serviceAccountName"],
      "the ClusterRole is bound to the agent's ServiceAccount")

# --- Webhooks: fail-open, and the namespace selector -----------------------------------------


def selects(selector, labels):
    """Kubernetes LabelSelector: matchLabels AND every matchExpression; empty selects all."""
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, vals = e["key"], e["operator"], e.get("values") or []
        if op == "In" and not (key in labels and labels[key] in vals):
            return False
        if op == "NotIn" and key in labels and labels[key] in vals:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ValueError(f"unknown operator {op}")
    return True


# The evaluator on known cases first, so that a wrong one cannot pass the checks below.
check(selects({}, {}) and selects({}, {"a": "b"}), "empty selector selects everything")
check(not selects({"matchExpressions": [{"key": "a", "operator": "In", "values": ["x"]}]}, {}),
      "In needs the key")
check(selects({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["x"]}]}, {}),
      "NotIn selects a namespace without the key")
check(not selects({"matchLabels": {"a": "x"},
                   "matchExpressions": [{"key": "b", "operator": "Exists"}]}, {"a": "x"}),
      "matchLabels AND matchExpressions")
check(not selects({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": ""}),
      "DoesNotExist fails on a present key")

mwc = by_kind["MutatingWebhookConfiguration"][0]
hooks = {w["name"]: w for w in mwc["webhooks"]}
check(sorted(hooks) == ["advise.rightsize.io", "enforce.rightsize.io"],
      "two webhooks: advise and enforce")
WANT_RULES = {("", "pods"), ("batch", "jobs"), ("batch", "cronjobs"),
              ("kubeflow.org", "pytorchjobs"), ("kubeflow.org", "mpijobs"),
              ("jobset.x-k8s.io", "jobsets")}
for mode in ("advise", "enforce"):
    w = hooks[f"{mode}.rightsize.io"]
    other = "enforce" if mode == "advise" else "advise"
    check(w["failurePolicy"] == "Ignore", f"{mode}: fails open (failurePolicy Ignore)")
    check(isinstance(w.get("timeoutSeconds"), int) and 1 <= w["timeoutSeconds"] <= 2,
          f"{mode}: timeoutSeconds {w.get('timeoutSeconds')} (1..2)")
    check(w["sideEffects"] == "None" and w["admissionReviewVersions"] == ["v1"],
          f"{mode}: sideEffects None, AdmissionReview v1")
    check(w.get("reinvocationPolicy") == "Never", f"{mode}: reinvocationPolicy Never")
    svc = w["clientConfig"]["service"]
    check(svc["path"] == f"/k8s/admit/{mode}" and svc["name"] == service["metadata"]["name"]
          and svc.get("port", 443) == 443, f"{mode}: calls the Service at /k8s/admit/{mode}")
    check("caBundle" in w["clientConfig"], f"{mode}: has a caBundle field")
    sel = w["namespaceSelector"]
    label = "rightsize.io/admission"
    check(selects(sel, {label: mode, "team": "ml"}), f"{mode}: selects a namespace labelled {mode}")
    check(not selects(sel, {"team": "ml"}), f"{mode}: does not select an unlabelled namespace")
    check(not selects(sel, {label: other}), f"{mode}: does not select a namespace labelled {other}")
    got = set()
    for r in w["rules"]:
        check(r["operations"] == ["CREATE"], f"{mode}: rule {r['resources']} is CREATE only")
        for g in r["apiGroups"]:
            for res in r["resources"]:
                got.add((g, res))
    check(got == WANT_RULES, f"{mode}: pods, jobs, cronjobs, pytorchjobs, mpijobs, jobsets")

# --- Every flag passed to rightsize is one its --help lists ----------------------------------


def help_flags(*args):
    out = subprocess.run([RS, *args, "--help"], capture_output=True, text=True).stdout
    return set(re.findall(r"(?m)^\s+(--[a-z0-9-]+)", out))


global_flags = help_flags()
pending = []
for who, args in (("server", server["args"]), ("agent", agent["args"])):
    sub = next(a for a in args if not a.startswith("-") and a in ("serve", "agent"))
    before, after = args[:args.index(sub)], args[args.index(sub) + 1:]
    known_sub = help_flags(sub)
    for flag in [a for a in before if a.startswith("--")]:
        check(flag in global_flags, f"{who}: `rightsize {flag}` is in `rightsize --help`")
    for flag in [a for a in after if a.startswith("--")]:
        ok = flag in known_sub
        check(ok, f"{who}: `{flag}` is in `rightsize {sub} --help`")
        if not ok:
            pending.append(f"{sub} {flag}")
if pending:
    print("flags the manifests pass that this binary does not know yet: " + ", ".join(pending))

print(f"{len(FAILED)} failed")
sys.exit(1 if FAILED else 0)
