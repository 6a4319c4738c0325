#!/usr/bin/env bash
# hack/build-image.sh [--bin-dir DIR] [--name NAME[:TAG]] [--out FILE]
# Builds the aiqos container image without Docker or a registry: the root
# filesystem from hack/image-rootfs.sh (the same one agent/Containerfile
# copies), one gzip layer, an OCI image config and manifest, written as an
# OCI image layout archive (oci-layout, index.json, blobs/sha256/...) plus a
# Docker-style manifest.json, so all of these load it:
#   ctr -n k8s.io images import FILE     (containerd; the name comes from the
#                                         io.containerd.image.name annotation)
#   docker load -i FILE                  (then: kind load docker-image NAME)
#   skopeo copy oci-archive:FILE ...
# Reproducible: fixed timestamps (SOURCE_DATE_EPOCH, default 0), sorted
# entries, numeric root ownership. At the end every blob is re-read and its
# digest and size checked against the manifest.
#
# Defaults: --bin-dir build/bin, --name aiqos:<version> (AIQOS_VERSION of
# agent/version.h, the tag manifests/ and the Helm chart use), --out
# build/image/aiqos.oci.tar. The version is also the config's
# org.opencontainers.image.version label. Pushing it to a registry:
# docs/operations/upgrade.md ("Publishing an image").
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
bin_dir=$top/build/bin
version=$(sed -n 's/^#define AIQOS_VERSION "\(.*\)"$/\1/p' "$top/agent/version.h")
[ -n "$version" ] || { echo "build-image: error: no AIQOS_VERSION in agent/version.h" >&2; exit 1; }
name=aiqos:$version
out=$top/build/image/aiqos.oci.tar
epoch=${SOURCE_DATE_EPOCH:-0}

die() { echo "build-image: error: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
	case $1 in
	--bin-dir) bin_dir=$2; shift 2 ;;
	--name) name=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	-h | --help) sed -n '2,22p' "$0"; exit 0 ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
done
for c in jq sha256sum gzip tar; do
	command -v "$c" >/dev/null || die "'$c' not found (hack/install-deps.sh installs it)"
done
[[ $epoch =~ ^[0-9]+$ ]] || die "SOURCE_DATE_EPOCH '$epoch' is not a number"

# Reference as containerd and kubelet normalise it: "aiqos:0.1.0" ->
# "docker.io/library/aiqos:0.1.0"; no tag -> ":latest".
ref=$name
case ${ref##*/} in
*:*) ;;
*) ref=$ref:latest ;;
esac
first=${ref%%/*}
if [ "$first" = "$ref" ]; then
	ref=docker.io/library/$ref
elif [[ $first != *.* && $first != *:* && $first != localhost ]]; then
	ref=docker.io/$ref
fi
tag=${ref##*:}
[[ $ref =~ ^[a-z0-9][a-z0-9._/:-]*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ && $ref != *//* ]] ||
	die "'$name' is not a valid image reference"

case $(uname -m) in
x86_64) arch=amd64 ;;
aarch64) arch=arm64 ;;
*) arch=$(uname -m) ;;
esac
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)

work=$(mktemp -d /tmp/aiqos-image.XXXXXX)
trap 'rm -rf "$work"' EXIT
layout=$work/layout
mkdir -p "$layout/blobs/sha256"

bash "$top/hack/image-rootfs.sh" "$bin_dir" "$work/rootfs"

# blob FILE -> moves FILE into blobs/, prints "sha256:<hex> <size>"
blob() {
	local f=$1 hex size
	hex=$(sha256sum "$f" | cut -d' ' -f1)
	size=$(stat -c %s "$f")
	mv "$f" "$layout/blobs/sha256/$hex"
	echo "sha256:$hex $size"
}

# The layer: entries relative to /, sorted, root-owned, fixed mtime.
(cd "$work/rootfs" && find . -mindepth 1 | sed 's,^\./,,' | LC_ALL=C sort) >"$work/files"
tar -C "$work/rootfs" --no-recursion -T "$work/files" --mtime="@$epoch" --owner=0 --group=0 \
	--numeric-owner --format=posix --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
	-cf "$work/layer.tar"
diff_id=sha256:$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
gzip -n -9 "$work/layer.tar"
read -r layer_digest layer_size < <(blob "$work/layer.tar.gz")

jq -n --arg arch "$arch" --arg created "$created" --arg diff "$diff_id" --arg version "$version" '{
	architecture: $arch, os: "linux", created: $created,
	config: {
		User: "0:0",
		Entrypoint: ["/usr/local/bin/aiqos-agent"],
		Env: ["PATH=/usr/local/bin"],
		WorkingDir: "/",
		Labels: {"org.opencontainers.image.title": "aiqos",
			"org.opencontainers.image.description": "aiqos node agent and CNI plugin",
			"org.opencontainers.image.version": $version,
			"org.opencontainers.image.licenses": "Apache-2.0"}
	},
	rootfs: {type: "layers", diff_ids: [$diff]},
	history: [{created: $created, created_by: "hack/build-image.sh"}]
}' >"$work/config.json"
read -r config_digest config_size < <(blob "$work/config.json")

jq -n --arg cd "$config_digest" --argjson cs "$config_size" --arg ld "$layer_digest" --argjson ls "$layer_size" '{
	schemaVersion: 2,
	mediaType: "application/vnd.oci.image.manifest.v1+json",
	config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $cd, size: $cs},
	layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: $ld, size: $ls}]
}' >"$work/manifest.oci.json"
read -r manifest_digest manifest_size < <(blob "$work/manifest.oci.json")

jq -n --arg md "$manifest_digest" --argjson ms "$manifest_size" --arg arch "$arch" --arg ref "$ref" \
	--arg tag "$tag" '{
	schemaVersion: 2,
	mediaType: "application/vnd.oci.image.index.v1+json",
	manifests: [{
		mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $md, size: $ms,
		platform: {architecture: $arch, os: "linux"},
		annotations: {"io.containerd.image.name": $ref, "org.opencontainers.image.ref.name": $tag}
	}]
}' >"$layout/index.json"
printf '{"imageLayoutVersion":"1.0.0"}\n' >"$layout/oci-layout"
# Docker's `docker load` (before OCI layout support) reads this instead.
jq -n --arg c "blobs/sha256/${config_digest#sha256:}" --arg l "blobs/sha256/${layer_digest#sha256:}" \
	--arg ref "$ref" '[{Config: $c, RepoTags: [$ref], Layers: [$l]}]' >"$layout/manifest.json"

# Check what we wrote: every descriptor's digest and size match its blob.
check_desc() { # digest size
	local f=$layout/blobs/sha256/${1#sha256:}
	[ -f "$f" ] || die "blob $1 missing"
	[ "sha256:$(sha256sum "$f" | cut -d' ' -f1)" = "$1" ] || die "blob $1: digest mismatch"
	[ "$(stat -c %s "$f")" = "$2" ] || die "blob $1: size mismatch"
}
jq -e '.schemaVersion == 2 and (.manifests | length) == 1' "$layout/index.json" >/dev/null ||
	die "index.json malformed"
check_desc "$(jq -r '.manifests[0].digest' "$layout/index.json")" "$(jq -r '.manifests[0].size' "$layout/index.json")"
m=$layout/blobs/sha256/${manifest_digest#sha256:}
check_desc "$(jq -r '.config.digest' "$m")" "$(jq -r '.config.size' "$m")"
check_desc "$(jq -r '.layers[0].digest' "$m")" "$(jq -r '.layers[0].size' "$m")"
[ "sha256:$(gzip -dc "$layout/blobs/sha256/${layer_digest#sha256:}" | sha256sum | cut -d' ' -f1)" = \
	"$(jq -r '.rootfs.diff_ids[0]' "$layout/blobs/sha256/${config_digest#sha256:}")" ] ||
	die "layer diff_id does not match the config"

mkdir -p "$(dirname "$out")"
tar -C "$layout" --mtime="@$epoch" --owner=0 --group=0 --numeric-owner --sort=name \
	-cf "$out.tmp" oci-layout index.json manifest.json blobs
mv "$out.tmp" "$out"
echo "build-image: $out: $ref ($arch), manifest $manifest_digest, layer $((layer_size / 1024)) KiB"
