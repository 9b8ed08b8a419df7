"""Reproducer of shim @@ID@@ (written by `patchlane shim new`), following the protocol of
shims.reproducer: a host stamp line, then one sentinel; exit 0 fixed, 10 reproduced, 77 skipped.

    python reproduce.py --mode without   # does upstream still break?
    python reproduce.py --mode with      # does the shim fix it? (activates the shim first)
"""

from shims import reproducer


def check(with_shim: bool) -> str:
    # Import the target inside check(), so that in --mode with it is imported after activation.
    target = reproducer.require("@@MODULE@@", dist="@@DISTRIBUTION@@")
    # Replace this with the smallest program that shows the bug on `target`, then return
    # reproducer.BUG_REPRODUCED when it shows and reproducer.FIX_VALIDATED when it does not.
    raise reproducer.Skip(f"@@ID@@: the reproducer is not written yet ({target.__name__} imports)")


if __name__ == "__main__":
    reproducer.run("@@ID@@", check, packages=["@@DISTRIBUTION@@"])
