"""Prometheus' pod discovery for e2e/install (issue 39), as file_sd: Debian's Prometheus is
built without kubernetes_sd_configs, so this stands in for it the way the operator's
PodMonitors find pods: a watch of the API server, never a poll.

    python3 pod_sd.py DIR NAMESPACE:SELECTOR:PORT ...

For each job it runs `kubectl get pods --watch --output-watch-events -o json` (one LIST
when it starts, then the watch; started again if the API server ends it) and keeps
DIR/<n>.json (n: the job's place among the arguments, from 0), Prometheus' file_sd format, with one target per pod that is Running, has
an IP and is not being deleted: `IP:PORT`, labelled `pod`. Files are replaced atomically;
Prometheus reads them on change. SELECTOR may be empty (every pod of the namespace).
Runs until killed.
"""
import json
import os
import subprocess
import sys
import threading
import time

out_dir = sys.argv[1]
jobs = sys.argv[2:]


def write(path, pods, port):
    groups = [{"targets": [f"{ip}:{port}"], "labels": {"pod": name}}
              for name, ip in sorted(pods.items())]
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(groups, f)
    os.replace(tmp, path)


def serving(pod):
    meta, status = pod["metadata"], pod.get("status", {})
    return (status.get("phase") == "Running" and status.get("podIP")
            and not meta.get("deletionTimestamp"))


def watch(index, namespace, selector, port):
    path = os.path.join(out_dir, f"{index}.json")
    write(path, {}, port)
    command = ["kubectl", "get", "pods", "-n", namespace, "--watch", "--output-watch-events",
               "-o", "json"] + (["-l", selector] if selector else [])
    decoder = json.JSONDecoder()
    while True:
        pods = {}
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                   text=True)
        buffer = ""
        for chunk in iter(lambda: process.stdout.read(1), ""):
            buffer += chunk
            if chunk != "}":
                continue
            try:
                event, end = decoder.raw_decode(buffer.lstrip())
            except ValueError:
                continue
            buffer = ""
            pod = event.get("object", {})
            name = pod.get("metadata", {}).get("name")
            if not name:
                continue
            if event.get("type") != "DELETED" and serving(pod):
                pods[name] = pod["status"]["podIP"]
            else:
                pods.pop(name, None)
            write(path, pods, port)
        process.wait()
        time.sleep(1)


for index, spec in enumerate(jobs):
    namespace, selector, port = spec.split(":")
    threading.Thread(target=watch, args=(index, namespace, selector, port), daemon=True).start()
while True:
    time.sleep(3600)
