#!/usr/bin/env bash
# The README's tour, run exactly as written (issues 13 and 20): every
# `$ command` of README.md's ```console blocks, in order, against what
# `make run` and `make run-store` start (fenced --config fenced.conf, and
# fence-store with run-store's flags), must print exactly the lines the
# README shows.  Only the ports and the data directories differ: the test
# gives the daemons free ports and temp dirs and rewrites 7700/7710 in the
# commands it runs (never in the README), and points fencectl's default
# server ($FENCE_SERVER) at its fenced; `build/fencectl` is run by that
# very path from a directory whose build/ holds the programs under test.
# The one timing-dependent number, LOCK.INFO's remaining ms, is only
# checked to be a number.  Also: every build/PROGRAM the README runs is
# one `make run` builds (make list-run), so the two cannot drift.
. "$(dirname "$0")/../lib/lib.sh"
command -v redis-cli >/dev/null || skip_all "redis-cli not installed (redis-tools)"

# ---- what make run builds ----------------------------------------------
run_progs=$(make -C "$ROOT" --no-print-directory -s list-run 2>/dev/null)
check "make list-run names fenced, fencectl and fence-store ($run_progs)" \
    eval "grep -q 'fenced' <<<'$run_progs' && grep -q 'fencectl' <<<'$run_progs' && grep -q 'fence-store' <<<'$run_progs'"
for p in $(grep -oE '(^|[ `])build/[a-z][a-z-]*' "$ROOT/README.md" | sed 's/^[ `]//' | sort -u); do
    check "the README's $p is built by make run" grep -qw "$p" <<<"$run_progs"
done

# ---- the daemons, as make run / make run-store start them --------------
FP=$(free_port); MP=$(free_port); SP=$(free_port)
spawn fenced "$FENCED" --config "$ROOT/fenced.conf" --port "$FP" --metrics-port "$MP" \
    --data-dir "$TEST_TMP/fenced"
spawn store "$FENCE_STORE" --port "$SP" --bind 127.0.0.1 --data-dir "$TEST_TMP/store"
wait_fenced "$FP" || { cat "$TEST_TMP/fenced.log"; not_ok "fenced starts with fenced.conf"; finish; }
wait_port "$SP" || { cat "$TEST_TMP/store.log"; not_ok "fence-store starts"; finish; }
for _ in $(seq 1 100); do
    redis-cli -p "$FP" INFO 2>/dev/null | grep -q '^leader_ready:1' && break
    sleep 0.05
done

# build/ of the directory the tour runs in: the programs under test.
mkdir -p "$TEST_TMP/tree/build"
for b in fenced fencectl fence-store; do ln -s "$BUILD/$b" "$TEST_TMP/tree/build/$b"; done

cd "$TEST_TMP/tree" || exit 1
FP=$FP SP=$SP FENCE_SERVER=127.0.0.1:$FP "$PY" - "$ROOT/README.md" <<'PYEOF'
import os, re, subprocess, sys, time

text = open(sys.argv[1]).read()
blocks = re.findall(r"^```console\n(.*?)^```", text, re.S | re.M)
steps = []                       # (command, expected output lines)
for b in blocks:
    for line in b.splitlines():
        if line.startswith("$ "):
            steps.append([line[2:], []])
        elif steps:
            steps[-1][1].append(line)
fails = 0
def check(cond, what, detail=""):
    global fails
    print(("ok - " if cond else "not ok - ") + what)
    if not cond:
        fails += 1
        for l in detail.splitlines():
            print("#   " + l)
check(len(steps) >= 10, "the README's console blocks have the tour's steps (%d)" % len(steps))
ports = {"7700": os.environ["FP"], "7710": os.environ["SP"]}
for cmd, want in steps:
    # The comment after two spaces is the README's; 7700/7710 become the
    # test's ports (a word of its own: -p 7700, host:7700).
    run = re.sub(r"\s{2,}#.*$", "", cmd)
    run = re.sub(r"\b(7700|7710)\b", lambda m: ports[m.group(1)], run)
    # redis-cli prints replies raw when its stdout is not a terminal; the
    # README shows what a terminal shows.
    run = re.sub(r"\bredis-cli\b", "redis-cli --no-raw", run)
    t0 = time.monotonic()
    r = subprocess.run(["bash", "-c", run], capture_output=True, text=True, timeout=60)
    took = time.monotonic() - t0
    got = r.stdout.splitlines()
    same = len(got) == len(want)
    if same:
        for g, w in zip(got, want):
            if re.fullmatch(r"3\) \(integer\) 99\d\d", w):
                same = same and re.fullmatch(r"3\) \(integer\) \d+", g) is not None
            else:
                same = same and g == w
    # Only the ACQUIRE ... WAIT 1000 that times out may take a while.
    slow_ok = "WAIT 1000" in cmd and want == ["(nil)"]
    check(same, "tour: %s" % cmd.split("  #")[0],
          "ran: " + run + "\nexpected:\n  " + "\n  ".join(want) + "\ngot:\n  " +
          "\n  ".join(got) + ("\nstderr: " + r.stderr if r.stderr else ""))
    if not slow_ok:
        check(took < 2.0, "tour: %s answers at once (%.1fs)" % (cmd.split("  #")[0], took))
print("# %d failed in the tour" % fails)
sys.exit(1 if fails else 0)
PYEOF
rc=$?
[ "$rc" -eq 0 ] && ok "the README tour is reproducible" || not_ok "the README tour is reproducible"
finish
