#!/usr/bin/env python3
"""Offline validation of the Kubernetes deployment under k8s/ (no cluster needed).

Run it through scripts/validate-k8s.sh, which finds the tools. For every kustomization given
(default: k8s/base and every k8s/overlays/*):

1. renders it with a real kustomize (`kubectl kustomize DIR` or `kustomize build DIR`);
2. validates every rendered object against the Kubernetes JSON schemas bundled in the PyPI
   package kubernetes-validate, strict (unknown fields are errors), for each version in
   K8S_VERSIONS (default "1.31 1.37"); a kind without a schema is an error too, except
   the Prometheus Operator's ServiceMonitor and PodMonitor, checked against the subset of
   their CRD schemas (monitoring.coreos.com/v1) written below, strict as well;
3. checks the deployment's invariants (see check_target): resources on every container, the
   token only from a Secret, no API token or RBAC, non-root and read-only root filesystems,
   probes, PodDisruptionBudgets, Prometheus annotations, references that resolve, worker
   grace periods, the coordinator's Recreate strategy, the pipeline files' [llm] endpoint.

Prints one line per object (kind/name, schema versions, ok or the problems), then
"manifests: N passed, M failed". Exits 1 when anything failed, 2 when a tool is missing.
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

try:
    import yaml
    import kubernetes_validate.utils as kv
except ImportError as e:  # the shell wrapper checks first; this is for direct runs
    print(f"validate-k8s: missing Python package ({e.name}); run: bash scripts/install-k8s-tools.sh",
          file=sys.stderr)
    sys.exit(2)

# Secrets the production overlay expects to exist in the cluster (created out of band).
EXTERNAL_SECRETS = {"distillery-token", "distillery-object-store"}
# Secret keys whose committed values must be placeholders.
SECRET_KEY_RE = re.compile(r"TOKEN|SECRET|PASSWORD|ACCESS_KEY|PRIVATE|API_KEY", re.I)
PLACEHOLDER_PREFIX = "EXAMPLE-ONLY"
# Keys a pipeline file may have at the top level (crates/distillery-core/src/spec/check.rs,
# TOP_KEYS) and in [run] (spec/run.rs, RunSpec).
PIPELINE_TOP_KEYS = {"version", "name", "description", "output", "run", "inputs", "stages", "llm"}
PIPELINE_RUN_KEYS = {"shards", "batch_size", "parallelism", "max_bad_ratio", "split_bytes"}
PIPELINE_LLM_KEYS = {"base_url", "model", "api_key_env", "model_revision", "max_concurrency",
                     "min_concurrency", "pace", "context_tokens",
                     "timeout_secs", "max_retries", "seed", "cache", "price", "budget"}
POD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "Pod", "CronJob"}
RBAC_KINDS = {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
PIPELINES_MOUNT = "/etc/distillery/pipelines"


def pod_spec(obj: dict) -> dict | None:
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind == "Pod":
        return spec
    if kind == "CronJob":
        return (((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get("spec")
    if kind in POD_KINDS:
        return (spec.get("template") or {}).get("spec")
    return None


def pod_labels(obj: dict) -> dict:
    spec = obj.get("spec") or {}
    if obj.get("kind") == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    return ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}


def pod_annotations(obj: dict) -> dict:
    spec = obj.get("spec") or {}
    if obj.get("kind") == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    return ((spec.get("template") or {}).get("metadata") or {}).get("annotations") or {}


def containers(pod: dict):
    for c in pod.get("initContainers") or []:
        yield "initContainer", c
    for c in pod.get("containers") or []:
        yield "container", c


def selector_matches(selector: dict, labels: dict) -> bool:
    match = selector.get("matchLabels", selector) if isinstance(selector, dict) else {}
    if not match or not isinstance(match, dict):
        return False
    return all(labels.get(k) == v for k, v in match.items())


def flag_value(args: list[str], flag: str) -> str | None:
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def host_port(url: str) -> tuple[str, int] | None:
    m = re.match(r"^(?:[a-z]+://)?([^/:]+)(?::(\d+))?", url)
    if not m:
        return None
    port = int(m.group(2)) if m.group(2) else (443 if url.startswith("https://") else 80)
    return m.group(1), port


class Target:
    """One rendered kustomization and the problems found in it."""

    def __init__(self, path: str, objects: list[dict]):
        self.path = path
        self.objects = objects
        self.problems: dict[str, list[str]] = {}
        self.notes: dict[str, list[str]] = {}
        self.external: dict[str, set[str]] = {}
        self.by_kind: dict[str, dict[str, dict]] = {}
        for o in objects:
            self.by_kind.setdefault(o.get("kind", "?"), {})[(o.get("metadata") or {}).get("name", "?")] = o

    def named(self, kind: str) -> dict[str, dict]:
        return self.by_kind.get(kind, {})

    def fail(self, obj: dict, msg: str) -> None:
        self.problems.setdefault(key(obj), []).append(msg)

    def note(self, obj: dict, msg: str) -> None:
        self.notes.setdefault(key(obj), []).append(msg)


def key(obj: dict) -> str:
    return f"{obj.get('kind', '?')}/{(obj.get('metadata') or {}).get('name', '?')}"


def env_values(t: Target, c: dict) -> dict[str, str]:
    """The container's environment as far as it is known offline (for $(VAR) in args)."""
    out: dict[str, str] = {}
    for ef in c.get("envFrom") or []:
        ref = (ef.get("configMapRef") or {}).get("name")
        if ref and ref in t.named("ConfigMap"):
            for k, v in ((t.named("ConfigMap")[ref].get("data")) or {}).items():
                out[(ef.get("prefix") or "") + k] = v
    for e in c.get("env") or []:
        if "value" in e:
            out[e["name"]] = e["value"]
        ref = ((e.get("valueFrom") or {}).get("configMapKeyRef")) or {}
        if ref.get("name") in t.named("ConfigMap"):
            v = (t.named("ConfigMap")[ref["name"]].get("data") or {}).get(ref.get("key"))
            if v is not None:
                out[e["name"]] = v
    return out


def expand(args: list[str], env: dict[str, str]) -> list[str]:
    return [re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), a)
            for a in args]


def distillery_args(c: dict, env: dict[str, str]) -> list[str]:
    """The container's distillery arguments: its args, or, for a shell wrapper (`sh -c SCRIPT`,
    the CronJob computing the night's date), the words of the script's `exec distillery` line
    with $VAR and ${VAR} of the known environment filled in (the script's own variables stay)."""
    cmd = list(c.get("command") or [])
    args = list(c.get("args") or [])
    if cmd[-1:] == ["-c"] and cmd[0].rsplit("/", 1)[-1] in ("sh", "bash") and args:
        script = args[0].replace("\\\n", " ")
        for line in script.splitlines():
            words = shlex.split(line.strip(), comments=True) if line.strip() else []
            if words[:2] == ["exec", "distillery"]:
                sub = lambda m: env.get(m.group(1) or m.group(2), m.group(0))
                return [re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", sub, w)
                        for w in words[2:]]
        return []
    return expand(args, env)


def service_port(t: Target, host: str, port: int) -> bool:
    name = host.split(".")[0]
    svc = t.named("Service").get(name)
    return bool(svc) and any(p.get("port") == port for p in (svc.get("spec") or {}).get("ports") or [])


def check_container(t: Target, obj: dict, pod: dict, where: str, c: dict) -> None:
    cname = f"{where} {c.get('name')}"
    res = c.get("resources") or {}
    for part in ("requests", "limits"):
        have = res.get(part) or {}
        missing = [r for r in ("cpu", "memory") if r not in have]
        if missing:
            t.fail(obj, f"{cname}: resources.{part} lacks {', '.join(missing)}")
    gpu_req = (res.get("requests") or {}).get("nvidia.com/gpu")
    gpu_lim = (res.get("limits") or {}).get("nvidia.com/gpu")
    if gpu_req is not None and gpu_lim is None:
        t.fail(obj, f"{cname}: nvidia.com/gpu requested but not in limits")
    if gpu_lim is not None:
        if not (pod.get("nodeSelector") or pod.get("affinity")):
            t.fail(obj, f"{cname}: uses nvidia.com/gpu without a nodeSelector or affinity")
        if not any(tol.get("key") == "nvidia.com/gpu" for tol in pod.get("tolerations") or []):
            t.fail(obj, f"{cname}: uses nvidia.com/gpu without a toleration for nvidia.com/gpu")

    image = c.get("image") or ""
    last = image.rsplit("/", 1)[-1]
    if "@" not in image and (":" not in last or last.endswith(":latest")):
        t.fail(obj, f"{cname}: image `{image}` is not pinned to a tag (or is :latest)")

    sc = c.get("securityContext") or {}
    psc = pod.get("securityContext") or {}
    if not (sc.get("runAsNonRoot") or psc.get("runAsNonRoot")):
        t.fail(obj, f"{cname}: runAsNonRoot is not set")
    if (sc.get("runAsUser", psc.get("runAsUser")) == 0):
        t.fail(obj, f"{cname}: runs as uid 0")
    if sc.get("allowPrivilegeEscalation") is not False:
        t.fail(obj, f"{cname}: allowPrivilegeEscalation is not false")
    if sc.get("privileged"):
        t.fail(obj, f"{cname}: privileged")
    if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
        t.fail(obj, f"{cname}: capabilities.drop lacks ALL")
    if sc.get("readOnlyRootFilesystem") is not True:
        t.fail(obj, f"{cname}: readOnlyRootFilesystem is not true")
    seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
    if seccomp not in ("RuntimeDefault", "Localhost"):
        t.fail(obj, f"{cname}: seccompProfile is not RuntimeDefault")

    # The token: only from a Secret, never a literal, a ConfigMap or a --token argument.
    for e in c.get("env") or []:
        name = e.get("name", "")
        vf = e.get("valueFrom") or {}
        if name == "DISTILLERY_TOKEN" and not vf.get("secretKeyRef"):
            t.fail(obj, f"{cname}: DISTILLERY_TOKEN does not come from a secretKeyRef")
        if SECRET_KEY_RE.search(name) and ("value" in e or vf.get("configMapKeyRef")):
            t.fail(obj, f"{cname}: env {name} looks secret but is a literal or from a ConfigMap")
    for ef in c.get("envFrom") or []:
        ref = (ef.get("configMapRef") or {}).get("name")
        data = ((t.named("ConfigMap").get(ref) or {}).get("data")) or {}
        bad = [k for k in data if SECRET_KEY_RE.search(k)]
        if bad:
            t.fail(obj, f"{cname}: envFrom ConfigMap {ref} holds secret-looking keys {bad}")
    cmdline = list(c.get("command") or []) + list(c.get("args") or [])
    if any(a == "--token" or a.startswith("--token=") for a in cmdline):
        t.fail(obj, f"{cname}: passes the token on the command line (use DISTILLERY_TOKEN from a Secret)")
    base = last.split(":")[0].split("@")[0]
    is_distillery = base in ("distillery", "distillery-cuda")
    if is_distillery:
        gets_token = any(e.get("name") == "DISTILLERY_TOKEN" and (e.get("valueFrom") or {}).get("secretKeyRef")
                         for e in c.get("env") or [])
        gets_token = gets_token or flag_value(cmdline, "--token-file") is not None
        if not gets_token:
            t.fail(obj, f"{cname}: a distillery container without DISTILLERY_TOKEN from a Secret")

    # References.
    for ef in c.get("envFrom") or []:
        if (ef.get("configMapRef") or {}).get("name"):
            n = ef["configMapRef"]["name"]
            if n not in t.named("ConfigMap") and not ef["configMapRef"].get("optional"):
                t.fail(obj, f"{cname}: envFrom ConfigMap {n} is not in the rendered output")
        if (ef.get("secretRef") or {}).get("name"):
            check_secret_ref(t, obj, cname, ef["secretRef"]["name"], None)
    for e in c.get("env") or []:
        vf = e.get("valueFrom") or {}
        if vf.get("secretKeyRef"):
            check_secret_ref(t, obj, cname, vf["secretKeyRef"].get("name"), vf["secretKeyRef"].get("key"))
        if vf.get("configMapKeyRef"):
            n = vf["configMapKeyRef"].get("name")
            if n not in t.named("ConfigMap"):
                t.fail(obj, f"{cname}: configMapKeyRef {n} is not in the rendered output")

    port_names = {p.get("name") for p in c.get("ports") or []} | {p.get("containerPort") for p in c.get("ports") or []}
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        p = c.get(probe)
        if p and (p.get("httpGet") or {}).get("port") not in port_names and p.get("httpGet"):
            t.fail(obj, f"{cname}: {probe} port {(p.get('httpGet') or {}).get('port')} is no container port")
    mounts = {m.get("name") for m in c.get("volumeMounts") or []}
    vols = {v.get("name") for v in pod.get("volumes") or []}
    for m in mounts - vols:
        t.fail(obj, f"{cname}: volumeMount {m} has no volume")


def check_secret_ref(t: Target, obj: dict, cname: str, name: str | None, k: str | None) -> None:
    sec = t.named("Secret").get(name)
    if sec is None:
        if name in EXTERNAL_SECRETS:
            t.external.setdefault(key(obj), set()).add(name)
        else:
            t.fail(obj, f"{cname}: Secret {name} is neither rendered nor a known external Secret")
        return
    if k is not None:
        keys = set((sec.get("data") or {}).keys()) | set((sec.get("stringData") or {}).keys())
        if k not in keys:
            t.fail(obj, f"{cname}: Secret {name} has no key {k}")


def check_pipeline(t: Target, cm: dict, fname: str, text: str) -> None:
    where = f"pipeline {fname}"
    try:
        p = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        t.fail(cm, f"{where}: not valid TOML: {e}")
        return
    unknown = set(p) - PIPELINE_TOP_KEYS
    if unknown:
        t.fail(cm, f"{where}: unknown top-level keys {sorted(unknown)}")
    for req in ("version", "name", "output", "inputs"):
        if req not in p:
            t.fail(cm, f"{where}: missing `{req}`")
    if set(p.get("run") or {}) - PIPELINE_RUN_KEYS:
        t.fail(cm, f"{where}: unknown [run] keys {sorted(set(p['run']) - PIPELINE_RUN_KEYS)}")
    for i, inp in enumerate(p.get("inputs") or []):
        if not {"name", "format", "paths"} <= set(inp):
            t.fail(cm, f"{where}: inputs.{i} needs name, format and paths")
        for path in inp.get("paths") or []:
            if "://" not in path:
                t.fail(cm, f"{where}: inputs.{i} path {path} is local; a cluster pipeline reads URLs")
    if "://" not in str(p.get("output", "://")):
        t.fail(cm, f"{where}: output {p.get('output')} is local; a cluster pipeline writes a URL")
    llm = p.get("llm")
    if llm is None:
        return
    if set(llm) - PIPELINE_LLM_KEYS:
        t.fail(cm, f"{where}: unknown [llm] keys {sorted(set(llm) - PIPELINE_LLM_KEYS)}")
    hp = host_port(llm.get("base_url", ""))
    if not hp or not service_port(t, *hp):
        t.fail(cm, f"{where}: llm.base_url {llm.get('base_url')} is no rendered Service and port")
        return
    served = set()
    svc = t.named("Service")[hp[0].split(".")[0]]
    for o in t.objects:
        pod = pod_spec(o)
        if pod and selector_matches((svc.get("spec") or {}).get("selector") or {}, pod_labels(o)):
            for _, c in containers(pod):
                args = list(c.get("args") or [])
                v = flag_value(args, "--served-model-name") or flag_value(args, "--model")
                if v:
                    served.add(v)
    if served and llm.get("model") not in served:
        t.fail(cm, f"{where}: llm.model {llm.get('model')} is not served by {hp[0]} ({sorted(served)})")


def check_target(t: Target) -> None:
    for kind in RBAC_KINDS:
        for o in t.named(kind).values():
            t.fail(o, "RBAC object: Distillery's pods need no Kubernetes API access")
    for sa in t.named("ServiceAccount").values():
        if sa.get("automountServiceAccountToken") is not False:
            t.fail(sa, "automountServiceAccountToken is not false")
    for cm in t.named("ConfigMap").values():
        for k, v in (cm.get("data") or {}).items():
            if SECRET_KEY_RE.search(k):
                t.fail(cm, f"key {k} looks secret: it belongs in a Secret")
            if k.endswith(".toml"):
                check_pipeline(t, cm, k, v)
    for sec in t.named("Secret").values():
        for k, v in (sec.get("data") or {}).items():
            val = base64.b64decode(v).decode("utf-8", "replace")
            if SECRET_KEY_RE.search(k) and not val.startswith(PLACEHOLDER_PREFIX):
                t.fail(sec, f"key {k}: a committed Secret value must be a placeholder ({PLACEHOLDER_PREFIX}...)")
        t.note(sec, "placeholder values")

    pdbs = list(t.named("PodDisruptionBudget").values())
    services = list(t.named("Service").values())
    for o in t.objects:
        pod = pod_spec(o)
        if pod is None:
            continue
        kind = o["kind"]
        if pod.get("automountServiceAccountToken") is not False:
            t.fail(o, "pod automountServiceAccountToken is not false")
        sa = pod.get("serviceAccountName")
        if not sa or sa not in t.named("ServiceAccount"):
            t.fail(o, f"serviceAccountName {sa} is not a rendered ServiceAccount")
        for h in ("hostNetwork", "hostPID", "hostIPC"):
            if pod.get(h):
                t.fail(o, f"{h} is set")
        for v in pod.get("volumes") or []:
            if "hostPath" in v:
                t.fail(o, f"volume {v.get('name')} is a hostPath")
            if "configMap" in v and v["configMap"].get("name") not in t.named("ConfigMap"):
                t.fail(o, f"volume {v.get('name')}: ConfigMap {v['configMap'].get('name')} not rendered")
            if "secret" in v:
                check_secret_ref(t, o, f"volume {v.get('name')}", v["secret"].get("secretName"), None)
            if "persistentVolumeClaim" in v and v["persistentVolumeClaim"].get("claimName") not in t.named("PersistentVolumeClaim"):
                t.fail(o, f"volume {v.get('name')}: PVC {v['persistentVolumeClaim'].get('claimName')} not rendered")
        for where, c in containers(pod):
            check_container(t, o, pod, where, c)

        labels = pod_labels(o)
        ann = pod_annotations(o)
        all_ports = {p.get("containerPort") for _, c in containers(pod) for p in c.get("ports") or []}
        if ann.get("prometheus.io/scrape") == "true":
            port = ann.get("prometheus.io/port")
            if not port or int(port) not in all_ports:
                t.fail(o, f"prometheus.io/port {port} is no container port")
        elif kind == "Deployment":
            t.fail(o, "no prometheus.io/scrape annotation on the pod template")

        if kind == "Deployment":
            for where, c in containers(pod):
                if where == "container":
                    for probe in ("readinessProbe", "livenessProbe"):
                        if not c.get(probe):
                            t.fail(o, f"container {c.get('name')}: no {probe}")
            for where, c in containers(pod):
                args = distillery_args(c, env_values(t, c))
                if args[:1] == ["coordinator"]:
                    if o["spec"].get("replicas") != 1:
                        t.fail(o, "the coordinator must run exactly 1 replica")
                    if (o["spec"].get("strategy") or {}).get("type") != "Recreate":
                        t.fail(o, "the coordinator's strategy must be Recreate")
                    if not flag_value(args, "--state") or "$(" in flag_value(args, "--state"):
                        t.fail(o, f"--state {flag_value(args, '--state')} does not resolve")
                if args[:1] == ["worker"]:
                    grace = flag_value(args, "--grace-secs")
                    tgp = pod.get("terminationGracePeriodSeconds", 30)
                    if grace is None or not tgp > int(grace):
                        t.fail(o, f"terminationGracePeriodSeconds {tgp} is not above --grace-secs {grace}")
                    else:
                        t.note(o, f"grace {grace}s < terminationGracePeriodSeconds {tgp}s")
                    gpus = int(flag_value(args, "--gpus") or 0)
                    lim = int(((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu", 0))
                    if gpus != lim:
                        t.fail(o, f"--gpus {gpus} but nvidia.com/gpu limit {lim}")
                if args[:1] in (["worker"], ["submit"]):
                    url = flag_value(args, "--coordinator") or ""
                    hp = host_port(url)
                    if not hp or not service_port(t, *hp):
                        t.fail(o, f"--coordinator {url} is no rendered Service and port")
            comp = labels.get("app.kubernetes.io/component")
            if comp in ("coordinator", "worker"):
                if not any(selector_matches((p.get("spec") or {}).get("selector") or {}, labels) for p in pdbs):
                    t.fail(o, "no PodDisruptionBudget selects its pods")

        if kind in ("Job", "CronJob"):
            for where, c in containers(pod):
                args = distillery_args(c, env_values(t, c))
                if args[:1] != ["submit"]:
                    continue
                url = flag_value(args, "--coordinator") or ""
                hp = host_port(url)
                if not hp or not service_port(t, *hp):
                    t.fail(o, f"--coordinator {url} is no rendered Service and port")
                if "--wait" not in args:
                    t.fail(o, "submit without --wait: the Job would succeed before the pipeline")
                pipeline = args[1] if len(args) > 1 else ""
                found = False
                for m in c.get("volumeMounts") or []:
                    if pipeline.startswith(m.get("mountPath", "\0") + "/"):
                        vol = next((v for v in pod.get("volumes") or [] if v.get("name") == m.get("name")), {})
                        cm = t.named("ConfigMap").get((vol.get("configMap") or {}).get("name"))
                        if cm and pipeline[len(m["mountPath"]) + 1:] in (cm.get("data") or {}):
                            found = True
                if not found:
                    t.fail(o, f"pipeline {pipeline} is not a file of a mounted ConfigMap")

    for svc in services:
        sel = (svc.get("spec") or {}).get("selector") or {}
        targets = [o for o in t.objects if pod_spec(o) is not None and selector_matches(sel, pod_labels(o))]
        if not targets:
            t.fail(svc, "its selector matches no pod template")
            continue
        names = set()
        for o in targets:
            for _, c in containers(pod_spec(o)):
                for p in c.get("ports") or []:
                    names |= {p.get("name"), p.get("containerPort")}
        for p in (svc.get("spec") or {}).get("ports") or []:
            if p.get("targetPort", p.get("port")) not in names:
                t.fail(svc, f"targetPort {p.get('targetPort')} is no port of its pods")
    for pdb in pdbs:
        sel = (pdb.get("spec") or {}).get("selector") or {}
        if not any(pod_spec(o) is not None and selector_matches(sel, pod_labels(o)) for o in t.objects):
            t.fail(pdb, "its selector matches no pod template")


def render(kustomize: list[str], path: Path) -> tuple[list[dict] | None, str]:
    cmd = kustomize + [str(path)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"`{shlex.join(cmd)}` failed:\n{r.stderr.strip()}"
    try:
        docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    except yaml.YAMLError as e:
        return None, f"rendered YAML does not parse: {e}"
    return docs, ""


# The fields of the Prometheus Operator's monitors that k8s/ uses, as in the operator's CRDs
# (monitoring.coreos.com/v1); anything else is refused, like a strict schema check.
_SELECTOR = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
        "matchExpressions": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["key", "operator"],
            "properties": {"key": {"type": "string"},
                           "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                           "values": {"type": "array", "items": {"type": "string"}}}}},
    },
}
_DURATION = {"type": "string", "pattern": r"^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"}
_ENDPOINT = {
    "type": "object", "additionalProperties": False, "required": ["port"],
    "properties": {"port": {"type": "string"}, "path": {"type": "string"},
                   "interval": _DURATION, "scrapeTimeout": _DURATION,
                   "scheme": {"enum": ["http", "https"]}},
}
_METADATA = {
    "type": "object", "required": ["name"],
    "properties": {"name": {"type": "string"}, "namespace": {"type": "string"},
                   "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                   "annotations": {"type": "object", "additionalProperties": {"type": "string"}}},
}
MONITOR_SCHEMAS = {
    kind: {
        "type": "object", "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "monitoring.coreos.com/v1"}, "kind": {"const": kind},
            "metadata": _METADATA,
            "spec": {"type": "object", "additionalProperties": False,
                     "required": ["selector", endpoints],
                     "properties": {"selector": _SELECTOR,
                                    endpoints: {"type": "array", "minItems": 1, "items": _ENDPOINT},
                                    "namespaceSelector": {"type": "object"}}},
        },
    }
    for kind, endpoints in (("ServiceMonitor", "endpoints"), ("PodMonitor", "podMetricsEndpoints"))
}


def monitor_check(obj: dict) -> list[str]:
    import jsonschema
    v = jsonschema.Draft202012Validator(MONITOR_SCHEMAS[obj["kind"]])
    return [f"schema monitoring.coreos.com/v1: {'.'.join(str(p) for p in e.path)}: {e.message}"
            for e in v.iter_errors(obj)]


def check_monitors(t: "Target") -> None:
    """Each monitor selects something that has the port it scrapes."""
    for sm in t.named("ServiceMonitor").values():
        sel = sm["spec"]["selector"]
        ports = {p["port"] for p in sm["spec"]["endpoints"]}
        hits = [s for s in t.named("Service").values()
                if selector_matches(sel, (s.get("metadata") or {}).get("labels") or {})]
        if not hits:
            t.fail(sm, "selects no Service")
        for s in hits:
            names = {p.get("name") for p in s["spec"].get("ports", [])}
            for p in ports - names:
                t.fail(sm, f"Service {s['metadata']['name']} has no port named {p}")
    for pm in t.named("PodMonitor").values():
        sel = pm["spec"]["selector"]
        ports = {p["port"] for p in pm["spec"]["podMetricsEndpoints"]}
        hits = [o for kind in POD_KINDS for o in t.named(kind).values()
                if kind != "Job" and kind != "CronJob" and selector_matches(sel, pod_labels(o))]
        if not hits:
            t.fail(pm, "selects no pods")
        for o in hits:
            pod = pod_spec(o) or {}
            names = {p.get("name") for _, c in containers(pod) for p in c.get("ports", [])}
            for p in ports - names:
                t.fail(pm, f"{key(o)} has no container port named {p}")


def schema_check(obj: dict, versions: list[str]) -> list[str]:
    if obj.get("apiVersion") == "monitoring.coreos.com/v1" and obj.get("kind") in MONITOR_SCHEMAS:
        return monitor_check(obj)
    errs = []
    for v in versions:
        try:
            kv.validate(obj, v, strict=True)
        except kv.ValidationError as e:
            path = ".".join(str(p) for p in e.path)
            errs.append(f"schema {e.version}: {path}: {e.message}")
        except kv.SchemaNotFoundError as e:
            errs.append(f"schema {v}: {e.message}")
        except kv.VersionNotSupportedError:
            errs.append(f"schema: kubernetes-validate has no schemas for {v}")
    return errs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kustomize", required=True, help="render command, e.g. 'kubectl kustomize'")
    ap.add_argument("--versions", default=os.environ.get("K8S_VERSIONS", "1.31 1.37"))
    ap.add_argument("targets", nargs="*", help="kustomization directories (default: k8s/base k8s/overlays/*)")
    a = ap.parse_args()
    root = Path(__file__).resolve().parent.parent
    targets = [Path(p) for p in a.targets] or (
        [root / "k8s/base"] + sorted(p.parent for p in (root / "k8s/overlays").glob("*/kustomization.yaml")))
    versions = a.versions.replace(",", " ").split()
    kustomize = shlex.split(a.kustomize)
    passed = failed = 0
    print(f"kustomize: {a.kustomize}; schemas: kubernetes-validate {kv.__version__} (strict), "
          f"Kubernetes {', '.join(versions)}")
    for path in targets:
        rel = os.path.relpath(path, root) if path.is_absolute() else str(path)
        docs, err = render(kustomize, path)
        if docs is None:
            print(f"\n== {rel}: RENDER FAILED\n{err}")
            failed += 1
            continue
        print(f"\n== {rel} ({len(docs)} objects)")
        t = Target(rel, docs)
        check_target(t)
        check_monitors(t)
        for o in docs:
            errs = schema_check(o, versions) + t.problems.get(key(o), [])
            ns = (o.get("metadata") or {}).get("namespace")
            label = f"{key(o)}" + (f" [{ns}]" if ns else "")
            if errs:
                failed += 1
                print(f"  FAIL {label}")
                for e in errs:
                    print(f"       - {e}")
            else:
                passed += 1
                notes = list(dict.fromkeys(t.notes.get(key(o), [])))
                if key(o) in t.external:
                    notes.append("expects Secrets in the cluster: " + ", ".join(sorted(t.external[key(o)])))
                extra = "; ".join(notes)
                print(f"  ok   {label}" + (f"  ({extra})" if extra else ""))
    print(f"\nmanifests: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
