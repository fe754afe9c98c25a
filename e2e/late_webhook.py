#!/usr/bin/env python3
"""A second mutating webhook for the reinvocation scenario: it adds a container `late`
that mounts a hostPath volume at /late, after prestop-injector has run (its
configuration's name sorts after ours). With reinvocationPolicy: IfNeeded the API server
calls prestop-injector again, which must give `late` its cleanup too.

    late_webhook.py PORT CERT KEY      # serves https://127.0.0.1:PORT/
"""
import base64
import json
import ssl
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        request = review["request"]
        spec = request["object"]["spec"]["template"]["spec"]
        response = {"uid": request["uid"], "allowed": True}
        if not any(c.get("name") == "late" for c in spec.get("containers", [])):
            patch = [
                {"op": "add", "path": "/spec/template/spec/containers/-", "value": {
                    "name": "late", "image": "busybox:1.37", "command": ["sh", "-c", "sleep 5"],
                    "volumeMounts": [{"name": "late", "mountPath": "/late"}]}},
                {"op": "add", "path": "/spec/template/spec/volumes/-", "value": {
                    "name": "late", "hostPath": {"path": "/mnt/scratch/late", "type": "DirectoryOrCreate"}}},
            ]
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "response": response}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    port, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = HTTPServer(("127.0.0.1", port), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
