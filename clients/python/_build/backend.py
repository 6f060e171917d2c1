"""In-tree PEP 517 build backend: setuptools' own backend, taken from the
Python installation that runs the build.

pip builds a project in an isolated environment and would download the
build requirements into it; this backend has none (``requires = []``) and
puts the interpreter's own site-packages back on sys.path instead, so that
``pip install ./clients/python`` works offline with Debian's
python3-setuptools (or any setuptools >= 61 that is installed).
"""
import site
import sys

try:
    import setuptools  # noqa: F401  (already visible: a non-isolated build)
except ImportError:
    for _path in site.getsitepackages() + [site.getusersitepackages()]:
        if _path not in sys.path:
            sys.path.append(_path)

from setuptools import build_meta as _meta  # noqa: E402



def _missing(reqs):
    """The requirements setuptools asks for that are not importable here
    (older setuptools asks for "wheel", which python3-wheel provides)."""
    out = []
    for r in reqs:
        name = r.split(";")[0].split(">")[0].split("<")[0].split("=")[0].strip()
        try:
            __import__(name)
        except ImportError:
            out.append(r)
    return out


def get_requires_for_build_wheel(config_settings=None):
    """setuptools' requirements, minus the ones already installed."""
    return _missing(_meta.get_requires_for_build_wheel(config_settings))


def get_requires_for_build_sdist(config_settings=None):
    """setuptools' requirements, minus the ones already installed."""
    return _missing(_meta.get_requires_for_build_sdist(config_settings))

prepare_metadata_for_build_wheel = _meta.prepare_metadata_for_build_wheel
build_wheel = _meta.build_wheel
build_sdist = _meta.build_sdist
