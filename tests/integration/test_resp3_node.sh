#!/usr/bin/env bash
# RESP3 for today's clients (issue 20): the latest node-redis from npm with
# its DEFAULT options (RESP3: it connects with HELLO 3) and ioredis 5 run
# LEASE.GRANT/LOCK/UNLOCK on fenced and FSET/FGET on fence-store and read
# INFO's # Server section (resp3_node.js); redis-cli -3 against both
# daemons.  The packages are installed with npm into $BUILD/npm-resp3
# (cache $BUILD/npm-cache; never committed); when node or npm is missing or
# the install fails (no network), the node part is skipped.
. "$(dirname "$0")/../lib/lib.sh"

FP=$(free_port); SP=$(free_port)
spawn fenced "$FENCED" --port "$FP" --data-dir "$TEST_TMP/fenced"
spawn store "$FENCE_STORE" --port "$SP" --bind 127.0.0.1 --data-dir "$TEST_TMP/store"
# The same daemons with users: node-redis logs in with HELLO 3 AUTH.
printf 'user alice on >al1ce-pw-x ~* +@all\n' >"$TEST_TMP/users.acl"
AFP=$(free_port); ASP=$(free_port)
spawn afenced "$FENCED" --port "$AFP" --data-dir "$TEST_TMP/afenced" --acl-file "$TEST_TMP/users.acl"
spawn astore "$FENCE_STORE" --port "$ASP" --bind 127.0.0.1 --data-dir "$TEST_TMP/astore" \
    --acl-file "$TEST_TMP/users.acl"
wait_port "$AFP" || { cat "$TEST_TMP/afenced.log"; not_ok "fenced --acl-file starts"; finish; }
wait_port "$ASP" || { cat "$TEST_TMP/astore.log"; not_ok "fence-store --acl-file starts"; finish; }
wait_fenced "$FP" || { cat "$TEST_TMP/fenced.log"; not_ok "fenced starts"; finish; }
wait_port "$SP" || { cat "$TEST_TMP/store.log"; not_ok "fence-store starts"; finish; }
for _ in $(seq 1 200); do
    redis-cli -p "$FP" INFO 2>/dev/null | grep -q '^leader_ready:1' && break
    sleep 0.05
done

# redis-cli -3 sends HELLO 3 first and prints RESP3 types.
if command -v redis-cli >/dev/null; then
    out=$(redis-cli -3 -p "$FP" HELLO 3 2>&1)
    check "redis-cli -3: fenced answers HELLO 3 (proto 3)" grep -qx 'proto 3' <<<"$out"
    out=$(redis-cli -3 --no-raw -p "$FP" HELLO 3 2>&1)
    check "redis-cli -3: HELLO's reply is a map" grep -q '^1# "server" => "fenced"' <<<"$out"
    lease=$(redis-cli -3 -p "$FP" LEASE.GRANT 10000 2>&1)
    check "redis-cli -3: fenced LEASE.GRANT ($lease)" grep -qE '^[0-9]+$' <<<"$lease"
    tok=$(redis-cli -3 -p "$FP" LOCK cli3 "$lease" 2>&1)
    check "redis-cli -3: fenced LOCK ($tok)" grep -qE '^[0-9]+$' <<<"$tok"
    check_eq "redis-cli -3: fenced UNLOCK" "(integer) 1" "$(redis-cli -3 --no-raw -p "$FP" UNLOCK cli3 "$tok")"
    check_eq "redis-cli -3: LOCK.INFO of a free lock is (nil)" "(nil)" \
        "$(redis-cli -3 --no-raw -p "$FP" LOCK.INFO cli3)"
    check_eq "redis-cli -3: fenced INFO server has redis_version" "redis_version:7.0.0" \
        "$(redis-cli -3 -p "$FP" INFO server | tr -d '\r' | grep '^redis_version:')"
    check_eq "redis-cli -3: fence-store FSET" "OK" "$(redis-cli -3 -p "$SP" FSET cf 3 ck v)"
    check_eq "redis-cli -3: fence-store FGET" "v" "$(redis-cli -3 -p "$SP" FGET ck)"
    check_eq "redis-cli -3: fence-store FGET missing is (nil)" "(nil)" \
        "$(redis-cli -3 --no-raw -p "$SP" FGET nope)"
    check "redis-cli -3: fence-store INFO has fence_store_version" \
        grep -q '^fence_store_version:' <<<"$(redis-cli -3 -p "$SP" INFO | tr -d '\r')"
    check "redis-cli -3: CLIENT INFO shows resp=3" grep -q ' resp=3 ' <<<"$(redis-cli -3 -p "$SP" CLIENT INFO)"
    # INFO's sections (RESP2 and RESP3 alike): # Server first; INFO <section>.
    for port in "$FP" "$SP"; do
        check_eq "INFO on port $port starts with # Server" "# Server" "$(redis-cli -p "$port" INFO | head -n 1 | tr -d '\r')"
    done
    out=$(redis-cli -p "$FP" INFO server | tr -d '\r')
    check "fenced: INFO server has fenced_version and no # fenced section" \
        bash -c 'grep -q "^fenced_version:" <<<"$1" && ! grep -q "^leader_ready:" <<<"$1"' _ "$out"
    out=$(redis-cli -p "$FP" INFO fenced | tr -d '\r')
    check "fenced: INFO fenced has leader_ready and no # Server section" \
        bash -c 'grep -q "^leader_ready:1" <<<"$1" && ! grep -q "^redis_version:" <<<"$1"' _ "$out"
    out=$(redis-cli -p "$FP" INFO | tr -d '\r')
    check "fenced: INFO has # Server, # Clients, # Persistence (loading:0) and # fenced" \
        bash -c 'for k in "# Server" "# Clients" "# Persistence" "loading:0" "# fenced" "version:"; do grep -qx -- "$k.*" <<<"$1" || exit 1; done' _ "$out"
    # COMMAND DOCS is a map under RESP3: redis-cli -3 still builds its help.
    check "redis-cli -3: help LOCK from COMMAND DOCS (maps)" grep -q 'LOCK name lease \[SHARED\] \[WAIT ms\]' \
        <<<"$(printf 'help LOCK\n' | redis-cli -3 -p "$FP" 2>&1 | sed 's/\x1b\[[0-9;]*m//g')"
    # Plain redis-cli stays RESP2: the same commands, RESP2 nil.
    check_eq "redis-cli (RESP2): LOCK.INFO of a free lock is (nil)" "(nil)" \
        "$(redis-cli --no-raw -p "$FP" LOCK.INFO cli3)"
    check "redis-cli (RESP2): CLIENT INFO shows resp=2" grep -q ' resp=2 ' <<<"$(redis-cli -p "$SP" CLIENT INFO)"
else
    echo "# skipped redis-cli -3: redis-cli is not installed"
fi

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "# skipped the node clients: node or npm is not installed"
    finish
fi
NODE_DIR=$BUILD/npm-resp3
if [ ! -d "$NODE_DIR/node_modules/ioredis" ] || [ ! -d "$NODE_DIR/node_modules/redis" ]; then
    mkdir -p "$NODE_DIR"
    if ! (cd "$NODE_DIR" && timeout 180 npm install --no-audit --no-fund --cache "$BUILD/npm-cache" \
            redis@latest ioredis@5 >"$TEST_TMP/npm.log" 2>&1); then
        echo "# skipped the node clients: npm install redis@latest ioredis@5 failed: $(tail -n 1 "$TEST_TMP/npm.log")"
        finish
    fi
fi
timeout 60 node "$(dirname "$0")/resp3_node.js" "$NODE_DIR/node_modules" "$FP" "$SP" "$AFP" "$ASP"
rc=$?
[ "$rc" -eq 0 ] || not_ok "resp3_node.js exited with status $rc"
finish
