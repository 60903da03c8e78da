#!/usr/bin/env python3
"""Runs rtrb's own tests against pitlane_queue::spsc.

pitlane-queue's SPSC queue is meant to give an rtrb user what rtrb gives: the same operations
(under pitlane's names where they differ) and the same behaviours. This script checks it with
rtrb's own test files, not one of their lines changed. It does not copy them into the
repository; at run time it:

1. finds the rtrb version that Cargo.lock pins (the bench crate compares against it) and that
   version's sources in the cargo registry (`cargo fetch` puts them there), and fails with a
   clear message if they are absent;
2. writes a scratch crate under target/rtrb-conformance/ (its own `[workspace]`, so the
   repository's workspace does not see it) whose library, named `rtrb`, is the adapter
   .ci/rtrb_adapter.rs: rtrb's names for pitlane's spsc types and methods, forwarding each call
   to one pitlane method (it renames and reshapes only, and forbids `unsafe`; its docs hold the
   table of names). So rtrb's `use rtrb::...` lines compile unchanged against pitlane;
3. copies every file of rtrb's tests/ into it, inserting `#[cfg(any())]` (which compiles a
   function out) before each test named in SKIPPED, with its reason, and changing nothing else;
   the script checks that each skipped test exists and that no other line differs, and prints
   the inserted lines;
4. runs `cargo test --release` there.

Usage: python3 .ci/rtrb-conformance.py [extra arguments for `cargo test`]
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

TOOL = "rtrb-conformance"
ROOT = cargo_registry.ROOT
SCRATCH = os.path.join(ROOT, "target", "rtrb-conformance")
ADAPTER = os.path.join(ROOT, ".ci", "rtrb_adapter.rs")

# Tests compiled out, as `file stem -> {test name: reason}`. Every entry must name a test that
# exists in that file (the script checks), so a skip cannot outlive its test. Each reason is a
# difference between pitlane's spsc and rtrb that the test would otherwise report; the spsc
# module docs ("Coming from rtrb") list them for users.
ZERO_CAPACITY = (
    "a capacity of 0: rtrb makes a queue that is always full and empty, pitlane refuses it "
    "(spsc::try_channel gives ChannelError::ZeroCapacity, spsc::channel panics)"
)
NO_SLICES = (
    "as_slices/as_mut_slices: pitlane keeps each value beside its own state word "
    "(one cache line carries both between the ends), so a chunk's values are not contiguous "
    "and are reached by index (WriteChunkUninit::slot, WriteChunk::get/get_mut/iter_mut, "
    "ReadChunk::get/get_mut/iter/iter_mut); pitlane's write_chunk (Default-initialised) is "
    "there, lending its values by index only"
)
SKIPPED = {
    "lib": {
        "capacity": ZERO_CAPACITY + " (the loop starts at 0; capacities 1..10 pass in "
        "pitlane-queue's tests/chunks_spsc.rs capacity_is_exact_for_every_size)",
        "zero_capacity": ZERO_CAPACITY,
        "zero_sized_type_and_enormous_capacity": "a zero-sized T still costs one byte of state "
        "per slot in pitlane, so usize::MAX / 2 slots need 2^63 bytes and channel panics with "
        "ChannelError::OutOfMemory; rtrb stores nothing for a zero-sized T",
        "zero_sized_type_and_excessive_capacity": "expects rtrb's panic message \"capacity "
        "exceeds usize::MAX / 2\"; pitlane panics too, with its own message (\"...: the "
        "capacity is too large to allocate\", ChannelError::CapacityOverflow)",
        "trait_impls": ZERO_CAPACITY + "; it also checks rtrb's Debug and Display texts "
        "(\"Full(_)\", \"full ring buffer\", \"empty ring buffer\"; pitlane writes \"Full(..)\", "
        "\"the queue is full\", \"the queue is empty\") and compares ends with `!=`, which "
        "pitlane's ends do not implement",
    },
    "chunks": {
        "zero_capacity": ZERO_CAPACITY + "; and " + NO_SLICES,
        "single_capacity": NO_SLICES,
        "drop_write_chunk": NO_SLICES,
        "trait_impls": ZERO_CAPACITY + "; it also "
        "checks rtrb's type names in Debug (\"ReadChunkIntoIter\": pitlane's ReadChunk is its "
        "own iterator) and ChunkError's Display text (pitlane: \"too few slots: 0 available\")",
    },
}


def fail(message):
    cargo_registry.fail(TOOL, message)


def test_names(text):
    return set(re.findall(r"(?m)^fn (\w+)\(", text))


def compile_out(text, stem, name, reason):
    """Inserts `#[cfg(any())]` and the reason before the attributes of test `name`."""
    pattern = re.compile(r"(?m)^#\[test\]\n(?:#\[[^\n]*\]\n)*fn %s\(" % re.escape(name))
    found = pattern.findall(text)
    if len(found) != 1:
        fail(f"tests/{stem}.rs: expected one `#[test] fn {name}`, found {len(found)}")
    marker = f"// Skipped by .ci/rtrb-conformance.py: {reason}.\n#[cfg(any())]\n"
    return pattern.sub(lambda match: marker + match.group(0), text)


def check_only_insertions(before, after, origin):
    """Every line of rtrb's file is still there, in order, unchanged; prints what was added."""
    added = 0
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if tag != "insert":
            fail(f"{origin}: the rewrite changed rtrb's lines {a0 + 1}..{a1}; it may only insert")
        for line in after.splitlines()[b0:b1]:
            print(f"    + {line}")
            added += 1
    return added


def main():
    version = cargo_registry.locked_version(TOOL, "rtrb")
    sources = cargo_registry.registry_sources(TOOL, "rtrb", version, ["lib.rs"])
    test_files = sorted(f for f in os.listdir(os.path.join(sources, "tests")) if f.endswith(".rs"))
    print(f"{TOOL}: rtrb {version}'s tests/{{{', '.join(test_files)}}} from {sources}")
    for stem in SKIPPED:
        if f"{stem}.rs" not in test_files:
            fail(f"SKIPPED names tests/{stem}.rs, which rtrb {version} does not have")

    tests_dir = cargo_registry.fresh_scratch(SCRATCH)
    queue_path = os.path.join(ROOT, "crates", "pitlane-queue")
    manifest = f"""# Generated by .ci/rtrb-conformance.py; do not edit (it is rewritten on every run).
[package]
name = "rtrb-conformance"
version = "0.0.0"
# rtrb {version}'s edition, which its test files are written for.
edition = "2018"
publish = false

# Its own workspace: the repository's `cargo test --workspace` never sees this crate.
[workspace]

# The library is the adapter, under rtrb's name, so rtrb's `use rtrb::...` lines need no change.
[lib]
name = "rtrb"
path = "src/lib.rs"

# rtrb's tests are gated on rtrb's own feature name (write_and_read.rs needs `std`).
[features]
default = ["std"]
std = []

[dependencies]
pitlane-queue = {{ path = "{queue_path}" }}

[dev-dependencies]
# rtrb {version} asks for rand 0.10; its tests call only `rand::rng()` and `random_range`, which
# rand 0.9 (the version the workspace already locks) has as well.
rand = "0.9"
"""
    with open(os.path.join(SCRATCH, "Cargo.toml"), "w", encoding="utf-8") as out:
        out.write(manifest)
    shutil.copy(ADAPTER, os.path.join(SCRATCH, "src", "lib.rs"))
    # Start from the workspace's lock so that the crates they share resolve to the same versions.
    if not os.path.exists(os.path.join(SCRATCH, "Cargo.lock")):
        shutil.copy(os.path.join(ROOT, "Cargo.lock"), os.path.join(SCRATCH, "Cargo.lock"))

    total_skipped = 0
    for name in test_files:
        stem = name[: -len(".rs")]
        with open(os.path.join(sources, "tests", name), encoding="utf-8") as source:
            text = source.read()
        rewritten = text
        skipped = SKIPPED.get(stem, {})
        for test, reason in skipped.items():
            if test not in test_names(text):
                fail(f"SKIPPED names {stem}::{test}, which rtrb {version} does not have")
            rewritten = compile_out(rewritten, stem, test, reason)
        run = sorted(test_names(text) - set(skipped))
        print(f"{TOOL}: tests/{name}: runs {len(run)} ({', '.join(run)}), skips {len(skipped)}")
        check_only_insertions(text, rewritten, f"tests/{name}")
        total_skipped += len(skipped)
        with open(os.path.join(tests_dir, name), "w", encoding="utf-8") as out:
            out.write(rewritten)
    print(f"{TOOL}: {total_skipped} tests skipped, each with its reason above")

    cargo = os.environ.get("CARGO", "cargo")
    command = [cargo, "test", "--release", "--manifest-path", os.path.join(SCRATCH, "Cargo.toml")]
    command += sys.argv[1:]
    print(f"{TOOL}: " + " ".join(command), flush=True)
    sys.exit(subprocess.call(command))


if __name__ == "__main__":
    main()
