"""Writes mpi_operator/pod_rules/pod_template_schema.json: Kubernetes' own OpenAPI schema of a
PodTemplateSpec, taken from the release the local cluster builds (hack/cluster/versions.env).

The source is the OpenAPI v3 document that k8s.io/kubernetes publishes in its module
(api/openapi-spec/v3/api__v1_openapi.json), fetched with `go mod download` like every other
pinned Go module here. Only the definitions a PodTemplateSpec reaches are kept, and of each only
what a type check reads (types, formats, properties, required fields, items, map values,
enums); descriptions and list/patch markers are dropped. `allOf: [{$ref}]`, the generator's
way of attaching a description to a reference, becomes the reference itself.

Usage: pod_template_schema.py [--check]   (--check: exit 1 if the committed file is stale)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUTPUT = REPO / "mpi_operator" / "pod_rules" / "pod_template_schema.json"
SOURCE = "api/openapi-spec/v3/api__v1_openapi.json"
ROOT = "io.k8s.api.core.v1.PodTemplateSpec"
PREFIX = "#/components/schemas/"
KEPT = ("type", "format", "enum", "required", "properties", "items", "additionalProperties")


def kubernetes_version() -> str:
    for line in (REPO / "hack" / "cluster" / "versions.env").read_text().splitlines():
        if line.startswith("K8S_VERSION="):
            return line.partition("=")[2].strip()
    raise SystemExit("pod_template_schema.py: no K8S_VERSION in hack/cluster/versions.env")


def module_dir(version: str) -> Path:
    """The k8s.io/kubernetes module's directory in the Go module cache, downloaded if missing."""
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{version}"],
        check=True,
        capture_output=True,
        text=True,
        cwd="/",
        env=env,
    ).stdout
    return Path(json.loads(out)["Dir"])


def trimmed(node: Any) -> Any:
    """A schema node with only what a type check reads."""
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return {"$ref": node["$ref"].removeprefix(PREFIX)}
    if "allOf" in node and len(node["allOf"]) == 1:
        return trimmed(node["allOf"][0])
    if "oneOf" in node:
        # Quantity (string or number) and IntOrString (integer or string).
        return {"oneOf": [trimmed(choice) for choice in node["oneOf"]]}
    out: dict[str, Any] = {}
    for key in KEPT:
        if key not in node:
            continue
        value = node[key]
        if key == "properties":
            value = {name: trimmed(child) for name, child in sorted(value.items())}
        elif key in ("items", "additionalProperties"):
            value = trimmed(value)
        out[key] = value
    return out


def references(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if "$ref" in node else []
        for value in node.values():
            found += references(value)
        return found
    if isinstance(node, list):
        return [name for item in node for name in references(item)]
    return []


def render(version: str, document: dict[str, Any]) -> str:
    schemas = document["components"]["schemas"]
    definitions: dict[str, Any] = {}
    pending = [ROOT]
    while pending:
        name = pending.pop()
        if name in definitions:
            continue
        definitions[name] = trimmed(schemas[name])
        pending += references(definitions[name])
    generated = {
        "kubernetes": version,
        "source": f"k8s.io/kubernetes@{version}/{SOURCE}",
        "root": ROOT,
        "definitions": dict(sorted(definitions.items())),
    }
    return json.dumps(generated, indent=1, sort_keys=False) + "\n"


def main(argv: list[str]) -> int:
    version = kubernetes_version()
    document = json.loads((module_dir(version) / SOURCE).read_text())
    text = render(version, document)
    if argv[1:] == ["--check"]:
        if OUTPUT.read_text() != text:
            print(f"{OUTPUT.relative_to(REPO)} is stale: run make generate", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT.relative_to(REPO)} from Kubernetes {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
