"""Shim @@ID@@: the patch of @@MODULE@@ (written by `patchlane shim new`).

The runtime imports this module only when @@MODULE@@ is imported (after `shims.activate()`),
then calls check_shape(), probe() and apply() in that order. Until you write them, the shim
stands down: probe() says the broken behaviour is absent, so nothing is patched.
"""


def check_shape(module):
    """None when the target still has the shape this patch was written for, else one line why not
    (a function missing, its signature changed; shims.shape.unknown_shape fingerprints source)."""
    return None


def probe(module):
    """A one-line description of the broken behaviour when it is present here, else None.

    Probe the behaviour, not the version number, so a backported fix is noticed.
    """
    return None


def apply(module):
    """Fix the module in place (replace the broken function, wrap it, gate it)."""
    raise NotImplementedError("@@ID@@: write apply() before probe() reports the bug")
