"""`dgl` as an alias of dgld, for running DGL's own tests (and scripts that
import `dgl`) against dgld unchanged: `import dgl` gives dgld's top-level
names, and `import dgl.X.Y` gives the module dgld.X.Y itself (the same
object, so state set through one name is seen through the other).

Put this folder first on sys.path (scripts/dgl_suite.sh does). Not
installed: users change their imports (`import dgld as dgl`) instead."""

import importlib
import importlib.abc
import importlib.util
import sys

import dgld
from dgld import *  # noqa: F401,F403
from dgld import __all__  # noqa: F401


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """dgl.<name> imports as dgld.<name>."""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("dgl."):
            return None
        try:
            importlib.util.find_spec("dgld" + fullname[3:])
        except ModuleNotFoundError:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return importlib.import_module("dgld" + spec.name[3:])

    def exec_module(self, module):
        pass


if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _AliasFinder())


def __getattr__(name):
    """dgl.<attribute> not among dgld's exported names: dgld's own
    attribute (its submodules, version, ...)."""
    try:
        return getattr(dgld, name)
    except AttributeError:
        raise AttributeError(f"module 'dgl' (an alias of dgld) has no attribute {name!r}") from None
