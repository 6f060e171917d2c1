# adapters: the PostgreSQL (adapters/postgres/fence.sql) and Redis
# (adapters/redis/fence.lua) adapters are SQL and Lua files, so there is
# nothing to build.  Their tests start their own servers (PostgreSQL 15 on a
# Unix socket in a temp dir, redis-server on a free 127.0.0.1 port) and run
# under /usr/bin/python3 for psycopg2 and python3-redis.  Knobs (environment):
# FENCE_PG_CLIENTS/FENCE_PG_OPS and FENCE_REDIS_CLIENTS/FENCE_REDIS_OPS size
# the hammers (defaults 64x30 and 16x150); FENCE_REDIS_SEED replays the
# randomized token check; KEEP_TMP=1 keeps the server dirs.
INTEG_TESTS += tests/integration/test_pg_adapter.py tests/integration/test_redis_adapter.py
