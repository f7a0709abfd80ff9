#!/usr/bin/env bash
# Installs what `make test` needs beyond Go modules. Idempotent and quiet when
# everything is present, so it is cheap to run before every test.
set -euo pipefail
cd "$(dirname "$0")/.."

# versitygw: the real S3 server the object-store and end-to-end tests use.
./scripts/install-versitygw.sh
