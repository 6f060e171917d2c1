# adapters: the PostgreSQL (adapters/postgres/fence.sql) and Redis
# (adapters/redis/fence.lua) adapters are SQL and Lua files, so there is
# nothing to build.  Their tests start their own servers (PostgreSQL 15 on a
# Unix socket in a temp dir, redis-server on a free 127.0.0.1 port) and run
# under /usr/bin/python3 for psycopg2 and python3-redis.
INTEG_TESTS += tests/integration/test_redis_adapter.py
