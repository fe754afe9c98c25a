# Issue 39, "Runbooks whose commands run": every command of docs/RUNBOOKS.md's ```sh
# blocks runs against this pass's install, as the on-call would paste it, with the
# documented names. tests/runbook_commands.rs checks them against the installs as
# rendered; that cannot tell a name the live objects do not have, a flag this kubectl or
# Helm refuses, a jsonpath that prints nothing `openssl` can read, or an RBAC check the
# API server answers "no". lib/runbooks_live.py runs them: `<pod>`, `<ip>` and `<uid>`
# become a live node DaemonSet pod's name, IP and a pod's uid; the commands marked for
# the other install method are left out, `# cert-manager` ones skipped (no cert-manager
# here); what mutates runs as a server-side dry run, so nothing changes; the e2e
# cluster's known limits (no metrics-server, no Prometheus operator CRDs, no previous
# container) are skipped only when the command and its error text both say so.
# Run it after a cluster-wide install with the reaper (the runbooks name its container,
# Secret and service account). Sourced by run.sh; uses its k, M, NODE_NS, NODE_DS, NS,
# ROOT, WORK, HERE and FAILS.

runbooks_live() {
  local dir="$WORK/runbooks" pods pod= ip= uid= failed
  mkdir -p "$dir"
  if ! pods=$(k -n "$NODE_NS" get pods -o json); then
    FAILS+=("runbooks: the node DaemonSet's pods in $NODE_NS can be listed")
    return
  fi
  # A running pod of the node DaemonSet, not on its way out.
  read -r pod ip uid < <(jq -r --arg ds "$NODE_DS" '
    [.items[] | select(.metadata.deletionTimestamp == null and .status.phase == "Running")
      | select(.status.podIP != null)
      | select(any(.metadata.ownerReferences[]?; .kind == "DaemonSet" and .name == $ds))]
    | first // empty | "\(.metadata.name) \(.status.podIP) \(.metadata.uid)"' <<<"$pods")
  if [[ -z "$pod" ]]; then
    FAILS+=("runbooks: a running pod of the DaemonSet $NODE_DS in $NODE_NS")
    return
  fi
  # `<uid>` is a tenant's pod in the runbook (NodeAgentBusy): the suite's namespace's
  # first pod if it has one, else the DaemonSet pod's own.
  local tenant
  tenant=$(k -n "$NS" get pods -o json 2>/dev/null | jq -r '.items[0].metadata.uid // empty')
  [[ -n "$tenant" ]] && uid=$tenant
  echo "    $M: <pod> $pod, <ip> $ip, <uid> $uid" >&2
  if python3 "$HERE/lib/runbooks_live.py" --root "$ROOT" --method "$M" \
    --pod "$pod" --ip "$ip" --uid "$uid" "$ROOT/docs/RUNBOOKS.md" >"$dir/$M.log" 2>&1; then
    sed 's/^/    /' "$dir/$M.log" >&2
  else
    sed 's/^/    /' "$dir/$M.log" >&2
    failed=$(grep -c '^FAIL' "$dir/$M.log")
    if ((failed > 0)); then
      FAILS+=("every runbook command runs against the $M install ($failed failed)")
    else
      FAILS+=("lib/runbooks_live.py runs the runbooks (it stopped: $(tail -n 1 "$dir/$M.log"))")
    fi
  fi
}
