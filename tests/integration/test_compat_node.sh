#!/usr/bin/env bash
# ioredis 5 and node-redis 4 against fenced and fence-store (issue 13), see
# compat_node.js.  The packages are installed with npm into
# $BUILD/npm-compat (cache $BUILD/npm-cache; never committed); when node or
# npm is missing or the install fails (no network), the test is skipped.
#
# Both daemons call fence_compat_handle; registered by mk/compat.mk.
. "$(dirname "$0")/../lib/lib.sh"
command -v node >/dev/null || skip_all "node is not installed"
command -v npm >/dev/null || skip_all "npm is not installed"
NODE_DIR=$BUILD/npm-compat
if [ ! -d "$NODE_DIR/node_modules/ioredis" ] || [ ! -d "$NODE_DIR/node_modules/redis" ]; then
    mkdir -p "$NODE_DIR"
    (cd "$NODE_DIR" && timeout 180 npm install --no-audit --no-fund --cache "$BUILD/npm-cache" \
        ioredis@5 redis@4 >"$TEST_TMP/npm.log" 2>&1) ||
        skip_all "npm install ioredis@5 redis@4 failed: $(tail -n 1 "$TEST_TMP/npm.log")"
fi

FP=$(free_port); SP=$(free_port)
spawn fenced "$FENCED" --port "$FP" --data-dir "$TEST_TMP/fenced"
spawn store "$FENCE_STORE" --port "$SP" --bind 127.0.0.1 --data-dir "$TEST_TMP/store"
wait_fenced "$FP" || { cat "$TEST_TMP/fenced.log"; not_ok "fenced starts"; finish; }
wait_port "$SP" || { cat "$TEST_TMP/store.log"; not_ok "fence-store starts"; finish; }
for _ in $(seq 1 100); do
    redis-cli -p "$FP" INFO 2>/dev/null | grep -q '^leader_ready:1' && break
    sleep 0.05
done
timeout 60 node "$(dirname "$0")/compat_node.js" "$NODE_DIR/node_modules" "$FP" "$SP"
rc=$?
[ "$rc" -eq 0 ] || not_ok "compat_node.js exited with status $rc"
finish
