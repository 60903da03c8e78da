#!/usr/bin/env python3
"""Per window of `wait_probe sone1`: who wakes the runtime's workers, on which CPU they land,
and how often they preempt the notifying thread (docs/notes/wait-bench.md, twenty-first
session).

Usage: wake_placement.py TRACE PROBE_OUTPUT [NOTIFIER_COMM]
TRACE is the text of `perf script -F comm,tid,cpu,time,event,trace` over a
`perf record -a -e sched:sched_switch,sched:sched_wakeup` of the probe; PROBE_OUTPUT is the
probe's own output (one line per window); NOTIFIER_COMM is the probe binary's name (the main
thread's comm, default wait_probe). Each window, warm-up included, runs on a fresh 6-worker
runtime, so window k's workers are the probe's worker threads 6k..6k+5 in thread-id order."""
import collections
import re
import sys

SWITCH = re.compile(r"\s*(\S+)\s+(\d+)\s+\[(\d+)\]\s+[\d.]+: sched:sched_switch: prev_comm=(\S+) "
                    r"prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=(\S+) next_pid=(\d+)")
WAKEUP = re.compile(r"\s*(\S+)\s+(\d+)\s+\[(\d+)\]\s+[\d.]+: sched:sched_wakeup: comm=(\S+) "
                    r"pid=(\d+) prio=\d+ target_cpu=(\d+)")
WORKER = "tokio-rt-worker"
NOTIFIER = sys.argv[3] if len(sys.argv) > 3 else "wait_probe"


def main(trace, probe_out):
    lines = open(trace).read().splitlines()
    workers = set()
    for line in lines:
        m = SWITCH.match(line)
        if m:
            for comm, tid in ((m[4], m[5]), (m[7], m[8])):
                if comm == WORKER:
                    workers.add(int(tid))
            continue
        m = WAKEUP.match(line)
        if m and m[4] == WORKER:
            workers.add(int(m[5]))
    # Only the probe's own workers (other processes may name threads the same): thread ids
    # above the notifier's, which is the process's main thread.
    main_tid = min(int(m[2]) for m in map(SWITCH.match, lines)
                   if m and m[1].startswith(NOTIFIER[:15]))
    workers = {tid for tid in workers if tid > main_tid}
    window = {tid: i // 6 for i, tid in enumerate(sorted(workers))}
    per = collections.defaultdict(collections.Counter)
    for line in lines:
        m = WAKEUP.match(line)
        if m and m[4] == WORKER and int(m[5]) in window:
            w = per[window[int(m[5])]]
            if m[1].startswith(NOTIFIER[:15]):
                w["by notifier"] += 1
                w["by notifier, onto its CPU"] += m[3] == m[6]
            elif m[1] == WORKER:
                w["by a worker"] += 1
            continue
        m = SWITCH.match(line)
        if m and m[4].startswith(NOTIFIER[:15]) and m[6].startswith("R") and int(m[8]) in window:
            per[window[int(m[8])]]["notifier preempted by a worker"] += 1
    windows = [l for l in open(probe_out).read().splitlines() if "ns/iter" in l]
    for i, line in enumerate(windows):
        ns = re.search(r"(\d+) ns/iter", line)[1]
        woken = re.search(r"([\d.]+) woken/iter", line)[1]
        iters = re.search(r"(\d+) iters", line)[1]
        w = per[i]
        print(f"window {i}: {int(ns) / 1000:6.0f} us/iter, {iters:>4} iters, {woken:>5} queued "
              f"wake-ups/iter; workers woken by the notifier {w['by notifier']:5d} "
              f"({w['by notifier, onto its CPU']:5d} onto its CPU), by workers "
              f"{w['by a worker']:5d}; notifier preempted by a worker "
              f"{w['notifier preempted by a worker']:5d}")


main(sys.argv[1], sys.argv[2])
