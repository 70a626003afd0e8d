"""A throwaway data directory and workspace for the A/B drivers beside this file, removed at
exit, and the environment that points `chitin` at them with the build's trusted keys."""

import atexit
import os
import shutil
import tempfile


def scratch_env(prefix):
    """The data directory and the environment for a `chitin` run in it."""
    data = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, data, ignore_errors=True)
    workspace = os.path.join(data, "workspace")
    os.mkdir(workspace)
    env = dict(os.environ, CHITIN_DATA_DIR=data, CHITIN_WORKSPACE=workspace,
               CHITIN_TRUSTED_KEYS=os.path.abspath("build/trusted_keys"))
    return data, env
