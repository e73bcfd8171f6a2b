#!/usr/bin/env bash
# make cluster-deps: builds each control-plane component from its Go module (through the Go
# module proxy, with the ordinary `go` client) into
#   ~/.cache/jobset-multislice-policy/cluster/<module>@<version>/
# One small module of ours per component (cluster/deps/<component>/go.mod) pins it, since
# they depend on different k8s.io versions. A component already built is not built again.
# Prints the path of each binary, one `name=path` line each, on stdout.
#
#   cluster/deps.sh            the control plane (make cluster-deps)
#   cluster/deps.sh registry   only CNCF distribution's registry, for the publish test
#                              (tests/registry/publish.bats), which `make e2e-tests` runs where
#                              kwctl and policy-server are installed: a run that would skip it
#                              does not build it
#   cluster/deps.sh kubectl    only kubectl (the control plane's, cached with it), for e2e.bats'
#                              run of docs/operations.md's settings check (`kubectl kustomize`)
#   cluster/deps.sh audit-scanner   only Kubewarden's audit scanner, for `make cluster-test`'s part
#                              `audit`, which runs it only where kwctl and policy-server are
#                              installed: elsewhere it is not built
#   cluster/deps.sh cosign     only cosign, the release that release.yml's cosign-installer
#                              installs, for the same test's signatures (`go install`: cosign's
#                              go.mod has no replace directive, so it needs no module of ours)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${CLUSTER_CACHE:-$HOME/.cache/jobset-multislice-policy/cluster}"
mkdir -p "$cache"

# The version of `module` that cluster/deps/<component>/go.mod requires.
required() { (cd "$here/deps/$1" && go list -m -f '{{.Version}}' "$2"); }

# build <component> <module> <package> <binary> [ldflags]
build() {
  local component=$1 module=$2 package=$3 binary=$4 ldflags=${5:-}
  local version dir
  version=$(required "$component" "$module")
  [ -n "$version" ] || { echo "cluster/deps/$component/go.mod requires no $module" >&2; exit 1; }
  dir="$cache/${module//\//_}@$version"
  # The build is keyed on what our module pins (go.mod, go.sum) and how it is built, not on
  # file times: a fresh clone's files are all new.
  local key
  key=$(cat "$here/deps/$component/go.mod" "$here/deps/$component/go.sum" <(echo "$package $ldflags") |
    sha256sum | cut -c1-16)
  if [ ! -x "$dir/$binary" ] || [ "$(cat "$dir/$binary.key" 2>/dev/null)" != "$key" ]; then
    echo "building $binary from $module@$version" >&2
    local start=$SECONDS
    (cd "$here/deps/$component" &&
      go build -mod=readonly -trimpath -ldflags "-s -w $ldflags" -o "$dir/$binary.tmp" "$package")
    mv "$dir/$binary.tmp" "$dir/$binary"
    echo "$key" > "$dir/$binary.key"
    echo "built $binary in $((SECONDS - start)) s" >&2
  fi
  echo "$binary=$dir/$binary"
}

# go_install <module> <version> <package> <binary> [ldflags]: `go install <package>@<version>`,
# built against the module's own go.mod and go.sum (go install refuses a module whose go.mod has
# replace directives: those get a module of ours, above), into the same cache.
go_install() {
  local module=$1 version=$2 package=$3 binary=$4 ldflags=${5:-}
  local dir="$cache/${module//\//_}@$version" key
  key=$(echo "$package@$version $ldflags" | sha256sum | cut -c1-16)
  if [ ! -x "$dir/$binary" ] || [ "$(cat "$dir/$binary.key" 2>/dev/null)" != "$key" ]; then
    echo "building $binary from $module@$version" >&2
    local start=$SECONDS
    rm -rf "$dir/bin.tmp" && mkdir -p "$dir/bin.tmp"
    GOBIN="$dir/bin.tmp" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w $ldflags" "$package@$version"
    mv "$dir/bin.tmp/$binary" "$dir/$binary" && rmdir "$dir/bin.tmp"
    echo "$key" > "$dir/$binary.key"
    echo "built $binary in $((SECONDS - start)) s" >&2
  fi
  echo "$binary=$dir/$binary"
}

# The cosign that release.yml's cosign-installer installs (its `cosign-release:`; tests/native/
# signing.rs holds the two equal), with the version `cosign version` prints, as upstream's
# Makefile sets it.
COSIGN_VERSION=v3.0.6

if [ "${1-}" = cosign ]; then
  go_install github.com/sigstore/cosign/v3 "$COSIGN_VERSION" \
    github.com/sigstore/cosign/v3/cmd/cosign cosign \
    "-X sigs.k8s.io/release-utils/version.gitVersion=$COSIGN_VERSION"
  exit 0
fi
if [ "${1-}" = registry ]; then
  build registry github.com/distribution/distribution/v3 \
    github.com/distribution/distribution/v3/cmd/registry registry
  exit 0
fi
if [ "${1-}" = audit-scanner ]; then
  build audit-scanner github.com/kubewarden/audit-scanner github.com/kubewarden/audit-scanner \
    audit-scanner
  exit 0
fi
[ $# -eq 0 ] || [ "$1" = kubectl ] ||
  { echo "usage: cluster/deps.sh [registry|cosign|audit-scanner|kubectl]" >&2; exit 2; }

k8s=$(required kubernetes k8s.io/kubernetes)
minor=${k8s#v1.}; minor=${minor%%.*}
# Without a version the binaries say v0.0.0-master, which controllers such as Kueue refuse.
k8s_version="-X k8s.io/component-base/version.gitVersion=$k8s -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
if [ "${1-}" = kubectl ]; then
  build kubectl k8s.io/kubernetes k8s.io/kubernetes/cmd/kubectl kubectl "$k8s_version"
  exit 0
fi

build etcd go.etcd.io/etcd/server/v3 jobset-multislice-policy/cluster/etcd etcd
for cmd in kube-apiserver kube-controller-manager kube-scheduler; do
  build kubernetes k8s.io/kubernetes "k8s.io/kubernetes/cmd/$cmd" "$cmd" "$k8s_version"
done
build jobset sigs.k8s.io/jobset sigs.k8s.io/jobset jobset-manager
build kueue sigs.k8s.io/kueue sigs.k8s.io/kueue/cmd/kueue kueue-manager
# Kubewarden's controller (main package cmd in v1.31) and kubectl, whose built-in kustomize
# applies the test kustomizations over examples/.
build kubewarden github.com/kubewarden/kubewarden-controller \
  github.com/kubewarden/kubewarden-controller/cmd kubewarden-controller
build kubectl k8s.io/kubernetes k8s.io/kubernetes/cmd/kubectl kubectl "$k8s_version"
