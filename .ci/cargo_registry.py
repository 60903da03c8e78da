"""What the conformance scripts (.ci/*-conformance.py) share: the version of a package that
Cargo.lock pins, and that version's sources (with its tests/) in the cargo registry."""

import glob
import os
import re
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fail(tool, message):
    sys.exit(f"{tool}: error: {message}")


def locked_version(tool, package):
    """The one version of `package` in Cargo.lock."""
    with open(os.path.join(ROOT, "Cargo.lock"), encoding="utf-8") as lock:
        text = lock.read()
    found = re.findall(
        r'\[\[package\]\]\nname = "%s"\nversion = "([^"]+)"' % re.escape(package), text
    )
    if len(found) != 1:
        fail(tool, f"expected exactly one `{package}` in Cargo.lock, found {found}")
    return found[0]


def registry_sources(tool, package, version, test_files):
    """The registry's directory of `package` `version` that holds every one of `test_files`
    under tests/."""
    cargo_home = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
    pattern = os.path.join(cargo_home, "registry", "src", "*", f"{package}-{version}")
    for candidate in sorted(glob.glob(pattern)):
        if all(os.path.isfile(os.path.join(candidate, "tests", f)) for f in test_files):
            return candidate
    fail(
        tool,
        f"the sources of {package} {version} (with its tests/) are not in the cargo registry "
        f"({pattern}); run `cargo fetch` in {ROOT} first",
    )


def fresh_scratch(scratch):
    """Makes `scratch` a crate directory with an empty tests/ (removing the tests of an earlier
    run) and a src/, and returns the path of tests/."""
    tests_dir = os.path.join(scratch, "tests")
    if os.path.isdir(tests_dir):
        shutil.rmtree(tests_dir)
    os.makedirs(os.path.join(scratch, "src"), exist_ok=True)
    os.makedirs(tests_dir)
    return tests_dir
