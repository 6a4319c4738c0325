#!/usr/bin/env bash
# hack/build-helm.sh [--force] [--print-bin-dir] [--check]
# Builds helm from its Go module (helm.sh/helm/v3, cmd/helm) at a pinned
# version into a cache outside the repository, like hack/build-k8s.sh:
#
#   ${AIQOS_CACHE:-/var/cache/aiqos}/helm/<version>/bin/helm
#
# Rebuilt only when missing, when its stamp (version, Go version, flags)
# differs or when `helm version` does not report the pinned version; a second
# run costs a few milliseconds. Concurrent runs serialize on a lock.
# --print-bin-dir prints the bin directory on stdout (everything else goes to
# stderr); --check builds nothing: exit 0 if helm is built and current, 1 if
# not. Used by the "helm" suite of test/run.sh (test/helm/).
set -euo pipefail
# shellcheck source=hack/lib/go-tool.sh
. "$(dirname "$0")/lib/go-tool.sh"

TOOL=helm
TOOL_VERSION=${AIQOS_HELM_VERSION:-v3.21.4}
TOOL_MODULE=helm.sh/helm/v3
TOOL_PKG=helm.sh/helm/v3/cmd/helm
TOOL_GO=1.24
TOOL_STAMP_EXTRA=kube=client-go
[[ $TOOL_VERSION =~ ^v3\.[0-9]+\.[0-9]+$ ]] || go_tool_die "AIQOS_HELM_VERSION '$TOOL_VERSION' is not v3.MINOR.PATCH (v3.21.4)"

tool_reports_version() { [ "$("$1" version --template '{{.Version}}' 2>/dev/null)" = "$TOOL_VERSION" ]; }

# As upstream's Makefile: the default Kubernetes version of `helm template`
# and `helm lint` (Capabilities.KubeVersion) is that of its client-go
# (v0.36.x -> 1.36), not the v1.20 fallback.
tool_ldflags() {
	local cg ld p
	cg=$(sed -nE 's/^[[:space:]]*k8s\.io\/client-go v0\.([0-9]+)\..*/\1/p' "$1" | head -n 1)
	[ -n "$cg" ] || { go_tool_log "no k8s.io/client-go requirement in $1"; return 1; }
	ld="-s -w -X $TOOL_MODULE/internal/version.version=$TOOL_VERSION -X $TOOL_MODULE/internal/version.gitTreeState=clean"
	for p in pkg/lint/rules pkg/chartutil; do
		ld+=" -X $TOOL_MODULE/$p.k8sVersionMajor=1 -X $TOOL_MODULE/$p.k8sVersionMinor=$cg"
	done
	echo "$ld"
}

go_tool_build "$@"
