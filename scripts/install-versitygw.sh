#!/usr/bin/env bash
# Installs the versitygw S3 server that the S3 tests and benchmarks run
# (internal/s3test) into $(go env GOPATH)/bin. Idempotent: does nothing if a
# versitygw of the pinned version is already on PATH or in GOPATH/bin.
#
# Usage: scripts/install-versitygw.sh
# Env:   VERSITYGW_VERSION overrides the pinned version (keep it equal to
#        s3test.Version unless you are testing an upgrade).
set -euo pipefail

version="${VERSITYGW_VERSION:-v1.8.0}"
module="github.com/versity/versitygw"

# installed_version prints the module version a Go-built binary was built
# from. `versitygw --version` says "git" for `go install` builds, so ask the
# Go toolchain instead.
installed_version() {
	go version -m "$1" 2>/dev/null | awk -v m="$module" '$1 == "mod" && $2 == m { print $3 }'
}

gobin="$(go env GOPATH | cut -d: -f1)/bin"
for bin in "$(command -v versitygw || true)" "$gobin/versitygw"; do
	if [[ -n "$bin" && -x "$bin" && "$(installed_version "$bin")" == "$version" ]]; then
		echo "versitygw $version already installed: $bin"
		exit 0
	fi
done

echo "installing versitygw $version into $gobin (this compiles it; a few minutes)"
# GOBIN pinned so the binary lands where s3test looks; GOFLAGS cleared so a
# caller's -mod=vendor or similar cannot break a module@version install.
GOBIN="$gobin" GOFLAGS= go install "$module/cmd/versitygw@$version"
echo "installed: $gobin/versitygw ($(installed_version "$gobin/versitygw"))"
