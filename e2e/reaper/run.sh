#!/usr/bin/env bash
# End-to-end tests of the node reaper (`prestop-injector reap`, SPEC §13, issue #12)
# against a real kube-apiserver v1.20.2: etcd, the API server and the webhook on
# 127.0.0.1 as in e2e/run.sh, and the reaper as node-a with its host root (and node
# root) in $WORK/host (host path /scratch/x is $WORK/host/scratch/x), allowedHostPathPrefixes
# [/scratch], --delay 2s. No kubelet: pods with spec.nodeName node-a stay Pending, and a
# forced delete removes them at once, as a lost node or a force delete does. Ends with
# `N passed, M failed`; exits non-zero on any failure. Everything started here is stopped
# by pid on exit.
#
#   bash e2e/reaper/run.sh      # builds what is missing (e2e/setup.sh), then runs
#
# PRESTOP_E2E_KEEP=1 keeps the work directory (logs, state file, host tree) for a look after.
# e2e/reaper/scale.sh (not in CI) measures the reaper with 1,000 pods.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"

SUITE=e2e-reaper
# The cluster, the webhook and the reaper (--delay 2s); cleanup by pid on exit.
# shellcheck source=boot.sh
source "$ROOT/e2e/reaper/boot.sh"

# shellcheck source=../lib/assert.sh
source "$ROOT/e2e/lib/assert.sh"
# shellcheck source=scenarios.sh
source "$ROOT/e2e/reaper/scenarios.sh"

scenario "injected pod force-deleted: its directory emptied after the delay, Event and metrics" emptied
scenario "a pod the kubelet ended while its object stays (evicted, Failed): its directory emptied after the delay" ended_in_place
scenario "a pod still mounting the directory, /scratch or a child keeps it; emptied once all are gone" still_used
scenario "pod deleted while the reaper is down: emptied on reconcile from the state file" reconcile
scenario "a pod the webhook did not inject is never touched" not_injected
scenario "--dry-run: ScratchDirectoryWouldEmpty and the metric, files untouched" dry_run
scenario "API server down: nothing emptied, watch restarted, in sync again, no spurious deletion" apiserver_down
scenario "target swapped for a symlink to a canary after the pod is gone: refused" symlink_swap
scenario "forged pod (hand-written status and hook, no seal, below /scratch): refused as unsealed, never touched" forged
scenario "sealed pod copied to another namespace: refused as seal_mismatch, never touched" copied_elsewhere
scenario "sealed pod copied with inject: \"false\": ignored, never recorded, never touched" copied_opted_out
scenario "a pending pod on a hostPath PV of the directory (bound claim, no process) keeps it" pv_pending
scenario "a pod with no process reaching the directory through a node symlink keeps it" node_symlink
scenario "another tenant's 0700 directory in a uid-1000 pod's directory: survives, the pod's own files go" other_tenant
scenario "a pod without runAsUser/runAsGroup: its user is unknown, nothing is emptied" unknown_user
scenario "a pod bound to the node during the walk stops it; emptied once it is gone" walk_meets_a_new_pod
scenario "a restartable pod's sidecar: a sandbox recreation removes nothing; the deletion empties it (the agent asks the API server)" restartable_pod_ends_on_the_nodes_word

log "suite took $(($(date +%s) - started)) s (kube-apiserver $SERVER_VERSION)"
echo "$PASSED passed, $FAILED failed"
((FAILED == 0))
