"""A run's own Python children (shims.child) for real, under both isolations: a fork of the
launcher as it was before any run where that is faithful, a fresh interpreter where the child
must import a preloaded module itself, the same ``python -c`` in both, side by side, killed at
their timeout and with their run."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from retire.runs.launcher import Launcher
from retire.runs.reproduce import run_reproducer
from tests.support import shimtree
from tests.test_launcher import _shim, _state, tree  # noqa: F401 - tree is a fixture

# every test forks children from a launcher
pytestmark = pytest.mark.slow

#: What a child reports about itself, the same way in a fork and in a fresh interpreter.
PROBE = r"""
import json, os, sys, time
print(json.dumps({"heavy_preloaded": "heavypkg" in sys.modules, "argv": sys.argv,
                  "path0": sys.path[0], "name": __name__, "file": "__file__" in globals(),
                  "x": os.environ.get("CHILD_X"),
                  "shims_active": getattr(sys.modules.get("shims"), "_activated", False),
                  # what a stop or the guard looks for (retire.runs.reaper): it must reach this
                  # child too
                  "marked": b"PATCHLANE_RUN_TOKEN=" in open("/proc/self/environ", "rb").read(),
                  "began": time.time()}))
import heavypkg  # logs an import it has to do itself
time.sleep(float(os.environ.get("CHILD_SLEEP", "0")))
print(json.dumps({"ended": time.time()}))
sys.stderr.write("to stderr\n")
raise SystemExit(int(os.environ.get("CHILD_EXIT", "0")))
"""

CHILDREN_REPRODUCER = f"""
import json, os
from shims import child, reproducer

PROBE = {PROBE!r}

def check(with_shim):
    env = dict(os.environ, CHILD_X="x", CHILD_SLEEP="0.5")
    both = [child.start(PROBE, "a1", "a2", env=env),
            child.start(PROBE, "b", env=dict(env, CHILD_EXIT="3"), fresh=["heavypkg"])]
    for started in both:
        done = started.wait(timeout=60)
        lines = [json.loads(line) for line in done.stdout.splitlines()]
        print("# child " + json.dumps({{"forked": done.forked, "code": done.returncode,
                                        "stderr": done.stderr, **lines[0], **lines[1]}}))
    return reproducer.FIX_VALIDATED

if __name__ == "__main__":
    reproducer.run("{{shim_id}}", check, packages=["toylib"])
"""


def _reproducer(check_body: str) -> str:
    """A toy reproducer whose check() is ``check_body``; ``_log`` writes its children's pids to
    GRANDCHILD_LOG."""
    return (
        "import os, subprocess\nfrom shims import child, reproducer\n\n"
        "def _log(pid):\n    with open(os.environ['GRANDCHILD_LOG'], 'w') as handle:\n        "
        "handle.write(str(pid))\n\n"
        "def check(with_shim):\n"
        + textwrap.indent(textwrap.dedent(check_body), "    ")
        + '\nif __name__ == "__main__":\n    reproducer.run("{shim_id}", check, '
        'packages=["toylib"])\n'
    )


#: Starts two children that would sleep for ten minutes (a fork, and a fresh interpreter since it
#: must import heavypkg itself) and returns without waiting for them.
ABANDONING_REPRODUCER = _reproducer("""
    sleeping = "import time; time.sleep(600)"
    both = [child.start(sleeping, fresh=fresh) for fresh in ([], ["heavypkg"])]
    assert [c.forked for c in both] == [True, False]
    _log(" ".join(str(c.pid) for c in both))
    return reproducer.FIX_VALIDATED
""")

#: A child past its timeout: killed, and TimeoutExpired raised as subprocess.run raises it.
TIMING_OUT_REPRODUCER = _reproducer("""
    started = child.start("import time; print('started', flush=True); time.sleep(600)")
    try:
        started.wait(timeout=1)
    except subprocess.TimeoutExpired as expired:
        _log(started.pid)
        print(f"# timed out after {expired.timeout} s; output {expired.output!r}")
        return reproducer.BUG_REPRODUCED
    return reproducer.FIX_VALIDATED
""")

#: Two threads, each running a child and waiting for it: the first child ends only once the second
#: (started half a second later, from the other thread) has written its file, as one rank of a job
#: waits for the other. Neither thread's wait may hold up the other's start.
THREADED_REPRODUCER = _reproducer("""
    import threading, time
    flag = os.path.join(os.path.dirname(os.environ['GRANDCHILD_LOG']), 'second-started')
    waits = ("import os, sys, time\\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.02)\\n"
             "print('saw it')")
    writes = "import sys\\nopen(sys.argv[1], 'w').close()\\nprint('wrote it')"
    results = {}

    def first():
        results["first"] = child.run(waits, flag, timeout=20)

    def second():
        time.sleep(0.5)
        results["second"] = child.run(writes, flag, timeout=20)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print("# threads " + " ".join(f"{name}={done.returncode}:{done.stdout.strip()}:{done.forked}"
                                   for name, done in sorted(results.items())))
    return reproducer.FIX_VALIDATED if len(results) == 2 else reproducer.BUG_REPRODUCED
""")


def _children(record) -> list[dict]:
    return [
        json.loads(line[len("# child ") :])
        for line in record.output_tail.splitlines()
        if line.startswith("# child ")
    ]


def _gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while Path(f"/proc/{pid}").exists() and _state(pid) != "Z" and time.monotonic() < deadline:
        time.sleep(0.05)
    return not Path(f"/proc/{pid}").exists() or _state(pid) == "Z"


def test_children_are_forks_of_the_launcher_unless_they_must_import_fresh(tree):
    root, env, tmp = tree
    manifest = _shim(root, "toy_children", CHILDREN_REPRODUCER)
    with Launcher(sys.executable, ["heavypkg"], env) as launcher:
        forked = launcher.run(manifest, "with", env=env)
    fresh = run_reproducer(manifest, "with", env=env)
    assert forked.outcome == fresh.outcome == "fix-validated", forked.output_tail
    under_launcher, in_process = _children(forked), _children(fresh)
    # The plain child skipped the import (a fork of the launcher, where heavypkg was preloaded);
    # the one that must import heavypkg itself is a fresh interpreter, as both are without a
    # launcher.
    assert [c["forked"] for c in under_launcher] == [True, False]
    assert [c["heavy_preloaded"] for c in under_launcher] == [True, False]
    assert [c["forked"] for c in in_process] == [False, False]
    # heavypkg imports: the launcher's, the fresh child's under it, both fresh children's without
    # it.
    assert len((tmp / "heavy.log").read_text().split()) == 1 + 1 + 2
    # Everything else is what ``python -c`` gives, whichever way the child started.
    same = ("argv", "path0", "name", "file", "x", "code", "stderr", "shims_active", "marked")
    assert [{k: c[k] for k in same} for c in under_launcher] == [
        {k: c[k] for k in same} for c in in_process
    ]
    assert under_launcher[0]["argv"] == ["-c", "a1", "a2"] and under_launcher[0]["path0"] == ""
    assert under_launcher[0]["name"] == "__main__" and not under_launcher[0]["file"]
    assert [c["code"] for c in under_launcher] == [0, 3] and under_launcher[0][
        "stderr"
    ] == "to stderr\n"
    assert all(c["marked"] for c in under_launcher)
    # the run's shim was activated in the run, not before the fork
    assert not under_launcher[0]["shims_active"]
    # Started together, they ran side by side: each began before the other ended.
    for children in (under_launcher, in_process):
        first, second = children
        assert second["began"] < first["ended"] and first["began"] < second["ended"]


@pytest.mark.parametrize("isolation", ["launcher", "process"])
def test_a_child_past_its_timeout_is_killed(tree, isolation):
    root, env, tmp = tree
    manifest = _shim(root, "toy_child_timeout", TIMING_OUT_REPRODUCER)
    if isolation == "launcher":
        with Launcher(sys.executable, ["heavypkg"], env) as launcher:
            record = launcher.run(manifest, "without", env=env)
    else:
        record = run_reproducer(manifest, "without", env=env)
    assert record.outcome == "bug-reproduced", record.output_tail
    assert "# timed out after 1 s; output 'started\\n'" in record.output_tail
    assert _gone(int((tmp / "grandchild.pid").read_text()))


def test_a_child_ends_with_its_run(tree):
    root, env, tmp = tree
    manifest = _shim(root, "toy_child_abandoned", ABANDONING_REPRODUCER)
    with Launcher(sys.executable, ["heavypkg"], env) as launcher:
        record = launcher.run(manifest, "without", env=env)
        assert record.outcome == "fix-validated", record.output_tail
        pids = [int(pid) for pid in (tmp / "grandchild.pid").read_text().split()]
        # while the launcher still serves
        assert len(pids) == 2 and all(_gone(pid) for pid in pids)
        assert launcher.run(_shim(root, "toy"), "without", env=env).outcome == "bug-reproduced"


def test_children_waited_for_from_two_threads_do_not_hold_each_other_up(tree):
    root, env, _tmp = tree
    manifest = _shim(root, "toy_child_threads", THREADED_REPRODUCER)
    began = time.monotonic()
    with Launcher(sys.executable, ["heavypkg"], env) as launcher:
        record = launcher.run(manifest, "without", env=env)
    assert record.outcome == "fix-validated", record.output_tail
    assert "# threads first=0:saw it:True second=0:wrote it:True" in record.output_tail
    # not the first child's 20 s timeout
    assert time.monotonic() - began < 15


def test_outside_patchlane_a_child_is_a_fresh_interpreter(tmp_path):
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "heavypkg.py").write_text("")
    env = shimtree.subprocess_env(tmp_path, tmp_path / "shims", tmp_path / "site", CHILD_X="plain")
    code = textwrap.dedent("""
        import json
        from shims import child
        done = child.run(PROBE, "z", timeout=60)
        first = done.stdout.splitlines()[0]
        print(json.dumps({"forked": done.forked, "code": done.returncode, "out": first}))
    """).replace("PROBE", repr(PROBE))
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    answer = json.loads(result.stdout)
    assert answer["forked"] is False and answer["code"] == 0
    assert (
        json.loads(answer["out"])["argv"] == ["-c", "z"]
        and json.loads(answer["out"])["x"] == "plain"
    )
