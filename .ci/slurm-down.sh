#!/usr/bin/env bash
# Stop the daemons .ci/slurm-up.sh DIR started (by their PIDs, in DIR/pids) and check that
# they are gone. Exit 1 if one is still running after 10 s.
set -uo pipefail
dir=${1:?usage: slurm-down.sh DIR}
[ -f "$dir/pids" ] || exit 0
pids=$(tac "$dir/pids")
for pid in $pids; do kill -TERM "$pid" 2>/dev/null; done
for _ in $(seq 100); do
    alive=""
    for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive="$alive $pid"; done
    [ -z "$alive" ] && { echo "slurm-down: stopped$(printf ' %s' $pids)"; : > "$dir/pids"; exit 0; }
    sleep 0.1
done
for pid in $alive; do kill -KILL "$pid" 2>/dev/null; done
sleep 0.5
for pid in $alive; do kill -0 "$pid" 2>/dev/null && { echo "slurm-down: $pid still running" >&2; exit 1; }; done
echo "slurm-down: stopped (killed$alive after 10 s)"
: > "$dir/pids"
