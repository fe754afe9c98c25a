#!/usr/bin/env python3
"""Regenerates fuzz/corpus/*/seed-* from examples/ and tests/fixtures/.

YAML manifests are wrapped in the AdmissionReview the API server would send for a CREATE;
captured reviews are copied as they are. Run from the repository root.
"""
import json, os, pathlib, yaml

root = pathlib.Path(__file__).resolve().parents[2]
out = root / "fuzz/corpus/review_bytes"
out.mkdir(parents=True, exist_ok=True)

def review(obj, uid):
    group, _, version = obj["apiVersion"].rpartition("/")
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid, "kind": {"group": group, "version": version, "kind": obj["kind"]},
                        "name": obj.get("metadata", {}).get("name"), "namespace": "default",
                        "operation": "CREATE", "object": obj, "dryRun": False}}

sources = sorted(list((root / "examples").glob("*.yaml")) + list((root / "tests/fixtures").glob("*.yaml")))
for i, path in enumerate(sources):
    for j, doc in enumerate(d for d in yaml.safe_load_all(path.read_text()) if d):
        name = path.stem + ("" if j == 0 else f"-{j}")
        (out / f"seed-{name}.json").write_text(json.dumps(review(doc, f"seed-{i}-{j}"), indent=1) + "\n")
for path in [root / "examples/review-job-worker.json", *sorted((root / "tests/fixtures").glob("review-*.json"))]:
    (out / f"seed-{path.stem}.json").write_text(path.read_text())
# Not a review at all: the decoder's error paths.
(out / "seed-not-a-review.json").write_text('{"apiVersion":"v1","kind":"ConfigMap"}\n')

# pod_template reads its bytes through `arbitrary`; short inputs select each base manifest
# with the rest defaulted, which is enough for libFuzzer to start from.
pt = root / "fuzz/corpus/pod_template"
pt.mkdir(parents=True, exist_ok=True)
for i in range(8):
    (pt / f"seed-base-{i}").write_bytes(bytes([0, 0, 4, 0, 1, i, 2, 1, 3, 7, 1, 0, 2, 5, 0, 1, 9, 3, 0, 4] * 2))
