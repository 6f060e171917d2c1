#!/usr/bin/env bash
# serial
# test-timeout: 420
# The Go client (clients/go): gofmt, go vet and go test -v against real
# fenced and fence-store processes that the Go tests start themselves
# (binaries from $FENCED_BIN / $FENCE_STORE_BIN / $FENCECTL_BIN: this
# build's). Each top-level "--- PASS"/"--- FAIL" of go test becomes an
# "ok - "/"not ok - " line for tests/run.sh; a failing subtest too.
# Serial: the Go tests use short leases, an election and SIGSTOP.
# Skipped (77) only when the go command is missing (scripts/deps.sh test
# installs golang-go). No module is downloaded: the module has no
# dependencies, and GOPROXY=off, GOFLAGS=-mod=mod is not needed.
. "$(dirname "$0")/../lib/lib.sh"
command -v go >/dev/null 2>&1 || skip_all "go is not installed (apt-get install golang-go)"
for b in "$FENCED" "$FENCE_STORE" "$FENCECTL"; do
    [ -x "$b" ] || { not_ok "$b is built"; finish; }
done

# Caches under the build dir, so that a fresh clone works and nothing is
# written to $HOME.
mkdir -p "$BUILD/go/cache" "$BUILD/go/path"
export GOCACHE=$BUILD/go/cache GOPATH=$BUILD/go/path GOTOOLCHAIN=local GOPROXY=off \
       GOFLAGS= GOWORK=off GO111MODULE=on GOTMPDIR=$TEST_TMP \
       FENCED_BIN=$FENCED FENCE_STORE_BIN=$FENCE_STORE FENCECTL_BIN=$FENCECTL \
       FENCE_PROXY_BIN=$BUILD/fence-proxy
cd "$ROOT/clients/go" || { not_ok "cd clients/go"; finish; }

unformatted=$(gofmt -l . 2>&1)
check_eq "gofmt -l lists nothing" "" "$unformatted"

if go vet ./... >"$TEST_TMP/vet.log" 2>&1; then
    ok "go vet ./..."
else
    sed 's/^/# /' "$TEST_TMP/vet.log"
    not_ok "go vet ./..."
fi

TMPDIR=$TEST_TMP go test -count=1 -timeout 300s -v ./... >"$TEST_TMP/test.log" 2>&1
rc=$?
results=0
while IFS= read -r line; do
    case $line in
    "--- PASS: "*) ok "go: ${line#--- PASS: }"; results=$((results + 1)) ;;
    "--- SKIP: "*) ok "go: ${line#--- SKIP: } # skip"; results=$((results + 1)) ;;
    "--- FAIL: "*) not_ok "go: ${line#--- FAIL: }"; results=$((results + 1)) ;;
    *"--- FAIL: "*) not_ok "go: subtest ${line#*--- FAIL: }" ;;
    esac
done <"$TEST_TMP/test.log"
if [ "$rc" -ne 0 ] || [ "$results" -eq 0 ]; then
    grep -v -E '^(=== (RUN|PAUSE|CONT)|    --- PASS)' "$TEST_TMP/test.log" | tail -n 60 | sed 's/^/# /'
    not_ok "go test ./... exits 0 (status $rc, $results results)"
else
    ok "go test ./... exits 0 ($results results)"
fi
finish
