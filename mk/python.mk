# clients/python: the Python client (import name `fenced`), its
# integration tests and docs (docs/python.md).  The tests run with
# /usr/bin/python3 and import the package from the source tree
# (clients/python/src); test_python_install.sh pip-installs it offline into
# a temp venv.
INTEG_TESTS += $(wildcard tests/integration/test_python_*.py) tests/integration/test_python_install.sh
