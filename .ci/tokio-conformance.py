#!/usr/bin/env python3
"""Runs tokio's own Notify and Semaphore tests against pitlane_wait.

pitlane-wait claims to be a drop-in for tokio's `Notify` and `Semaphore`: changing the paths
`tokio::sync::{Notify, Semaphore, ...}` to `pitlane_wait::...` is all a user's code and tests
need. This script checks the claim with tokio's own test files, unmodified except for those
paths. It does not copy them into the repository; at run time it:

1. finds the tokio version that Cargo.lock pins and that version's sources in the cargo
   registry (`cargo fetch` puts them there), and fails with a clear message if they are absent;
2. writes a scratch crate under target/tokio-conformance/ (its own `[workspace]`, so the
   repository's workspace does not see it) that depends on pitlane-wait by path, on the same
   tokio, and on the dev-dependencies tokio's tests use (tokio-test, futures);
3. copies tokio's tests/sync_notify.rs, sync_notify_owned.rs, sync_semaphore.rs and
   sync_semaphore_owned.rs into it, rewriting only the paths of the types it replaces (see
   REWRITES), and checks that every file was rewritten and no replaced path is left;
4. from tokio's tests/async_send_sync.rs and tests/unwindsafe.rs, keeps the assertion macros
   and the assertions about these types, rewritten the same way (compile-time checks of Send,
   Sync, Unpin, !Unpin, UnwindSafe and RefUnwindSafe);
5. runs `cargo test` there, skipping only the tests named in SKIPPED, each with its reason.

Usage: python3 .ci/tokio-conformance.py [extra arguments for `cargo test`]
Environment: CARGO (default `cargo`), CARGO_HOME (default ~/.cargo).
"""

import difflib
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cargo_registry  # noqa: E402

ROOT = cargo_registry.ROOT
SCRATCH = os.path.join(ROOT, "target", "tokio-conformance")

# tokio's test files that exercise Notify and Semaphore, run whole.
TEST_FILES = [
    "sync_notify.rs",
    "sync_notify_owned.rs",
    "sync_semaphore.rs",
    "sync_semaphore_owned.rs",
]

# Paths of tokio's types and their pitlane_wait names. Only these are rewritten; everything
# else (tokio::spawn, #[tokio::test], tokio::sync::oneshot, tokio_test) stays tokio's.
REWRITES = {
    "tokio::sync::futures::Notified": "pitlane_wait::notify::Notified",
    "tokio::sync::futures::OwnedNotified": "pitlane_wait::notify::OwnedNotified",
    "tokio::sync::Notify": "pitlane_wait::Notify",
    "tokio::sync::Semaphore": "pitlane_wait::Semaphore",
    "tokio::sync::SemaphorePermit": "pitlane_wait::SemaphorePermit",
    "tokio::sync::OwnedSemaphorePermit": "pitlane_wait::OwnedSemaphorePermit",
    "tokio::sync::AcquireError": "pitlane_wait::AcquireError",
    "tokio::sync::TryAcquireError": "pitlane_wait::TryAcquireError",
}

# Tests of those files that are not run, as `file stem -> {test name: reason}`. Every entry
# must name a test that exists (the script checks), so a skip cannot outlive its test.
#
# None is skipped at tokio 1.54.1: every test of the four files compiles and passes against
# pitlane_wait. Four tests are compiled out by tokio's own `#[cfg(target_pointer_width =
# "32")]` on the 64-bit machines CI runs on, as they are in tokio's own 64-bit CI:
# sync_semaphore::acquire_many_exceeds_maxpermits, acquire_many_top_bit_exceeds_maxpermits,
# sync_semaphore_owned::acquire_many_owned_exceeds_maxpermits and
# acquire_many_owned_top_bit_exceeds_maxpermits (an `acquire_many` of a `u32` above
# MAX_PERMITS, possible only where `usize` is 32 bits).
SKIPPED = {}


def fail(message):
    cargo_registry.fail("tokio-conformance", message)


# The names of those types, as a regex group.
NAMES = (
    r"(?:Notify|Notified|OwnedNotified|Semaphore|SemaphorePermit|OwnedSemaphorePermit|"
    r"AcquireError|TryAcquireError)"
)


def rewrite_paths(text, origin):
    """Rewrites REWRITES' paths in `text`, grouped `use tokio::sync::{...}` lists included."""
    count = 0

    def split_group(match):
        nonlocal count
        indent, items = match.group(1), [i.strip() for i in match.group(2).split(",")]
        if any("{" in item for item in items):
            fail(f"{origin}: a nested `use tokio::sync::{{..{{..}}}}` group; extend the script")
        ours, theirs = [], []
        for item in filter(None, items):
            path, _, alias = (part.strip() for part in item.partition(" as "))
            target = REWRITES.get("tokio::sync::" + path)
            if target is None:
                theirs.append(item)
            else:
                ours.append(target[len("pitlane_wait::") :] + (f" as {alias}" if alias else ""))
        count += len(ours)
        lines = []
        if ours:
            lines.append(f"{indent}use pitlane_wait::{{{', '.join(ours)}}};")
        if theirs:
            lines.append(f"{indent}use tokio::sync::{{{', '.join(theirs)}}};")
        return "\n".join(lines)

    text = re.sub(r"(?m)^([ \t]*)use tokio::sync::\{([^;]*)\};", split_group, text)
    # Longest paths first, whole path segments only (`Semaphore` must not eat `SemaphorePermit`).
    for path in sorted(REWRITES, key=len, reverse=True):
        text, n = re.subn(re.escape(path) + r"\b", REWRITES[path], text)
        count += n
    # Nothing of ours may be left behind: no `tokio::sync::Name` path, and no name of ours in
    # what remains of a `use tokio::sync...;` statement.
    leftover = re.findall(r"tokio::sync::(?:futures::)?" + NAMES + r"\b", text)
    for statement in re.findall(r"use tokio::sync[^;]*;", text):
        leftover += re.findall(r"\b" + NAMES + r"\b", statement)
    if count == 0 or leftover:
        fail(f"{origin}: {count} paths rewritten, left unrewritten: {leftover}")
    return text, count


def show_changes(before, after):
    """Prints the lines the rewrite changed, so that the log shows all it did."""
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0):
        if line[:1] in "+-" and line[:3] not in ("+++", "---"):
            print(f"    {line}")


def test_names(text):
    return set(re.findall(r"(?m)^(?:async )?fn (\w+)\(", text))


def send_sync_subset(source):
    """The assertion machinery of tokio's async_send_sync.rs and its lines about our types."""
    marker = "// Manually re-implementation of `async_assert_fn` for `poll_fn`."
    if marker not in source:
        fail("tests/async_send_sync.rs changed shape: its prelude marker is gone")
    prelude = source[: source.index(marker)]
    ours = re.compile(
        r"^(?:assert_value|async_assert_fn)!\(tokio::sync::(?:futures::)?" + NAMES + r"\b"
    )
    lines = [line for line in source.splitlines() if ours.match(line)]
    if len(lines) < 10:
        fail(f"tests/async_send_sync.rs: only {len(lines)} assertions about Notify/Semaphore")
    # Only the prelude's imports and macros for other types go unused in this subset.
    prelude = "#![allow(unused_imports, unused_macros)]\n" + prelude
    return prelude + "\n// The assertions about Notify and Semaphore, as tokio writes them.\n" + (
        "\n".join(lines) + "\n"
    ), len(lines)


def unwind_subset(source):
    """tokio's tests/unwindsafe.rs, reduced to its Notify test and helper."""
    keep = []
    for name in ("notify_is_unwind_safe", "is_unwind_safe"):
        match = re.search(
            r"(?ms)^(#\[test\]\n)?fn %s(?:<[^>]*>)?\(\) \{.*?^\}|^fn %s<[^\n]*\{\}$"
            % (name, name),
            source,
        )
        if not match:
            fail(f"tests/unwindsafe.rs changed shape: `fn {name}` is gone")
        keep.append(match.group(0))
    uses = re.findall(r"(?m)^use std::panic::[^\n]*$", source)
    return "\n".join(uses) + "\n\n" + "\n\n".join(keep) + "\n"


def main():
    version = cargo_registry.locked_version("tokio-conformance", "tokio")
    tokio = cargo_registry.registry_sources("tokio-conformance", "tokio", version, TEST_FILES)
    print(f"tokio-conformance: tokio {version}'s tests from {tokio}/tests")

    tests_dir = cargo_registry.fresh_scratch(SCRATCH)

    wait_path = os.path.join(ROOT, "crates", "pitlane-wait")
    manifest = f"""# Generated by .ci/tokio-conformance.py; do not edit (it is rewritten on every run).
[package]
name = "tokio-conformance"
version = "0.0.0"
edition = "2021"
publish = false

# Its own workspace: the repository's `cargo test --workspace` never sees this crate.
[workspace]

# tokio's tests are gated on tokio's own feature names.
[features]
default = ["sync", "full"]
sync = []
full = []

[dependencies]

[dev-dependencies]
# The `tokio` feature: blocking_acquire* panic inside a runtime, as tokio's tests expect.
pitlane-wait = {{ path = "{wait_path}", features = ["tokio"] }}
tokio = {{ version = "={version}", features = ["full", "test-util"] }}
tokio-test = "0.4.0"
futures = {{ version = "0.3.0", features = ["async-await"] }}
"""
    with open(os.path.join(SCRATCH, "Cargo.toml"), "w", encoding="utf-8") as out:
        out.write(manifest)
    with open(os.path.join(SCRATCH, "src", "lib.rs"), "w", encoding="utf-8") as out:
        out.write("//! Empty: the tests are in tests/, copied from tokio by the script.\n")
    # Start from the workspace's lock so that the crates they share resolve to the same versions.
    if not os.path.exists(os.path.join(SCRATCH, "Cargo.lock")):
        shutil.copy(os.path.join(ROOT, "Cargo.lock"), os.path.join(SCRATCH, "Cargo.lock"))

    skip_args = []
    for name in TEST_FILES:
        with open(os.path.join(tokio, "tests", name), encoding="utf-8") as source:
            text = source.read()
        rewritten, count = rewrite_paths(text, f"tests/{name}")
        stem = name[: -len(".rs")]
        for test, reason in SKIPPED.get(stem, {}).items():
            if test not in test_names(text):
                fail(f"SKIPPED names {stem}::{test}, which tokio {version} does not have")
            print(f"tokio-conformance: skipping {stem}::{test}: {reason}")
            skip_args.append(test)
        print(f"tokio-conformance: tests/{name}: {count} paths rewritten")
        show_changes(text, rewritten)
        with open(os.path.join(tests_dir, name), "w", encoding="utf-8") as out:
            out.write(rewritten)

    with open(os.path.join(tokio, "tests", "async_send_sync.rs"), encoding="utf-8") as source:
        subset, lines = send_sync_subset(source.read())
    rewritten, count = rewrite_paths(subset, "tests/async_send_sync.rs")
    print(f"tokio-conformance: tests/async_send_sync.rs: {lines} assertions kept, {count} paths rewritten")
    with open(os.path.join(tests_dir, "async_send_sync.rs"), "w", encoding="utf-8") as out:
        out.write(rewritten)

    with open(os.path.join(tokio, "tests", "unwindsafe.rs"), encoding="utf-8") as source:
        rewritten, count = rewrite_paths(unwind_subset(source.read()), "tests/unwindsafe.rs")
    print(f"tokio-conformance: tests/unwindsafe.rs (Notify's test): {count} paths rewritten")
    with open(os.path.join(tests_dir, "unwindsafe.rs"), "w", encoding="utf-8") as out:
        out.write(rewritten)

    cargo = os.environ.get("CARGO", "cargo")
    command = [cargo, "test", "--manifest-path", os.path.join(SCRATCH, "Cargo.toml")]
    command += sys.argv[1:]
    if skip_args:
        command += ["--", "--exact"] + [arg for test in skip_args for arg in ("--skip", test)]
    print("tokio-conformance: " + " ".join(command), flush=True)
    sys.exit(subprocess.call(command))


if __name__ == "__main__":
    main()
