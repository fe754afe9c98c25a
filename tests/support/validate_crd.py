"""Strict validation of custom resources against a vendored CRD, with kubernetes-validate's
own machinery: its jsonschema validator, and its Kubernetes schema of ObjectMeta for
`metadata` (the CRD leaves metadata to the API server). kubernetes-validate ships no CRD
schemas, so tests/support/deploy.rs runs this with kubernetes-validate's interpreter:

    python validate_crd.py KUBERNETES_VERSION CRD.yaml RESOURCES.yaml

Strict as `kubernetes-validate --strict` and the API server's strict field validation:
a field the CRD does not define is an error (the API server would prune it silently).
Prints one `passed for resource` line per object, or the error; exits 1 on any error.
"""
import re
import sys

import jsonschema
import yaml
from kubernetes_validate import utils
from referencing import Registry, Resource


def strict(schema):
    """The CRD's structural schema as JSON Schema, closed where it lists properties."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def main():
    version, crd_file, resources_file = sys.argv[1:4]
    crd = [d for d in yaml.safe_load_all(open(crd_file)) if d][0]
    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    minor = [v for v in utils.all_versions() if utils.major_minor(v) <= utils.major_minor(version)][-1]
    definitions = utils.schema_contents(
        f"kubernetes-json-schema/v{minor}-local-strict/_definitions.json", version)
    registry = Resource.from_contents(definitions) @ Registry()
    schemas = {}
    for served in crd["spec"]["versions"]:
        schema = strict(served["schema"]["openAPIV3Schema"])
        schema["properties"]["metadata"] = {
            "$ref": definitions["$id"] + "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
        schema["properties"]["apiVersion"]["enum"] = [f"{group}/{served['name']}"]
        schema["properties"]["kind"]["enum"] = [kind]
        schema["required"] = sorted(set(schema.get("required", [])) | {"apiVersion", "kind", "metadata"})
        schemas[f"{group}/{served['name']}"] = schema
    failed = 0
    for resource in [d for d in yaml.safe_load_all(open(resources_file)) if d]:
        name = f"{resource.get('kind', '?').lower()}/{resource.get('metadata', {}).get('name', '?')}"
        schema = schemas.get(resource.get("apiVersion"))
        if resource.get("kind") != kind or schema is None:
            print(f"ERROR {resources_file}: {name} is not a {kind} of {sorted(schemas)}")
            failed = 1
            continue
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", resource["metadata"].get("name", "")):
            print(f"ERROR {resources_file}: {name}: metadata.name is not a DNS subdomain")
            failed = 1
            continue
        try:
            jsonschema.validators.Draft202012Validator(schema, registry=registry).validate(resource)
            print(f"INFO {resources_file} passed for resource {name} against {crd_file} (Kubernetes {minor})")
        except jsonschema.ValidationError as e:
            path = ".".join(str(p) for p in e.path)
            print(f"ERROR {resources_file} did not validate for resource {name}: {path}: {e.message}")
            failed = 1
    sys.exit(failed)


if __name__ == "__main__":
    main()
