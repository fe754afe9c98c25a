# examples/review-pod-from-job.json: the review of a Pod the Job controller creates from
# the seed Job's injected template, as kube-apiserver sends it to the webhook (the
# controller's labels, owner, generateName and managedFields; the defaults and the
# ServiceAccount token volume and mounts the API server's own admission adds before any
# webhook). The review a cluster sends most: one per Pod, where the seed is one per Job.
# Regenerate it when the seed's mutation changes (tests/core_podpass.rs says so):
#
#   target/release/prestop-injector mutate --config examples/config.yaml \
#     -f examples/job-worker.yaml -o json | jq -f bench/pod-from-job.jq \
#     > examples/review-pod-from-job.json
.spec.template as $t
| ($t.spec.containers | map(. + {
      resources: {},
      terminationMessagePath: "/dev/termination-log",
      terminationMessagePolicy: "File",
      volumeMounts: (.volumeMounts + [{name: "kube-api-access-7xk2p", readOnly: true,
        mountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}])
  })) as $containers
| ($t.spec.initContainers | map(. + {
      terminationMessagePath: "/dev/termination-log",
      terminationMessagePolicy: "File",
      imagePullPolicy: "IfNotPresent",
      volumeMounts: (.volumeMounts + [{name: "kube-api-access-7xk2p", readOnly: true,
        mountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}])
  })) as $inits
| {
  apiVersion: "admission.k8s.io/v1",
  kind: "AdmissionReview",
  request: {
    uid: "9d3e6a41-2c7b-4f5e-8a10-6b2f4c8d9e01",
    kind: {group: "", version: "v1", kind: "Pod"},
    resource: {group: "", version: "v1", resource: "pods"},
    requestKind: {group: "", version: "v1", kind: "Pod"},
    requestResource: {group: "", version: "v1", resource: "pods"},
    namespace: "default",
    operation: "CREATE",
    userInfo: {username: "system:serviceaccount:kube-system:job-controller",
      uid: "5b1a7c3e-0d2f-4e6a-9b8c-1f2e3d4c5b6a",
      groups: ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]},
    object: {
      kind: "Pod",
      apiVersion: "v1",
      metadata: {
        generateName: "job-worker-",
        namespace: "default",
        creationTimestamp: null,
        labels: {
          "batch.kubernetes.io/controller-uid": "0b6c1f0e-5a4d-4c3b-9e2f-4a5b6c7d8e9f",
          "batch.kubernetes.io/job-name": "job-worker",
          "controller-uid": "0b6c1f0e-5a4d-4c3b-9e2f-4a5b6c7d8e9f",
          "job-name": "job-worker"
        },
        annotations: $t.metadata.annotations,
        ownerReferences: [{apiVersion: "batch/v1", kind: "Job", name: "job-worker",
          uid: "0b6c1f0e-5a4d-4c3b-9e2f-4a5b6c7d8e9f", controller: true, blockOwnerDeletion: true}],
        managedFields: [{manager: "kube-controller-manager", operation: "Update",
          apiVersion: "v1", time: "2026-12-06T22:57:46Z", fieldsType: "FieldsV1",
          fieldsV1: {"f:metadata": {"f:annotations": {".": {},
              "f:prestop-injector.io/settings": {}, "f:prestop-injector.io/status": {}},
            "f:generateName": {}, "f:labels": {".": {}, "f:batch.kubernetes.io/controller-uid": {},
              "f:batch.kubernetes.io/job-name": {}, "f:controller-uid": {}, "f:job-name": {}},
            "f:ownerReferences": {".": {}, "k:{\"uid\":\"0b6c1f0e-5a4d-4c3b-9e2f-4a5b6c7d8e9f\"}": {}}},
          "f:spec": {"f:containers": {"k:{\"name\":\"busybox\"}": {".": {}, "f:command": {},
              "f:image": {}, "f:imagePullPolicy": {}, "f:lifecycle": {".": {}, "f:preStop": {".": {},
              "f:exec": {".": {}, "f:command": {}}}}, "f:name": {}, "f:resources": {},
              "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {},
              "f:volumeMounts": {".": {}, "k:{\"mountPath\":\"/.prestop-injector\"}": {".": {},
              "f:mountPath": {}, "f:name": {}, "f:readOnly": {}},
              "k:{\"mountPath\":\"/test-package\"}": {".": {}, "f:mountPath": {}, "f:name": {}}}}},
            "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:initContainers": {
              ".": {}, "k:{\"name\":\"prestop-install\"}": {".": {}, "f:command": {}, "f:image": {},
              "f:imagePullPolicy": {}, "f:name": {}, "f:resources": {}, "f:securityContext": {},
              "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {}, "f:volumeMounts": {}}},
            "f:restartPolicy": {}, "f:schedulerName": {}, "f:securityContext": {},
            "f:terminationGracePeriodSeconds": {}, "f:volumes": {".": {},
              "k:{\"name\":\"package\"}": {".": {}, "f:hostPath": {".": {}, "f:path": {}, "f:type": {}}, "f:name": {}},
              "k:{\"name\":\"prestop-clean\"}": {".": {}, "f:emptyDir": {".": {}, "f:sizeLimit": {}}, "f:name": {}}}}}}]
      },
      spec: ($t.spec + {
        volumes: ($t.spec.volumes + [{name: "kube-api-access-7xk2p", projected: {defaultMode: 420, sources: [
          {serviceAccountToken: {expirationSeconds: 3607, path: "token"}},
          {configMap: {name: "kube-root-ca.crt", items: [{key: "ca.crt", path: "ca.crt"}]}},
          {downwardAPI: {items: [{path: "namespace", fieldRef: {apiVersion: "v1", fieldPath: "metadata.namespace"}}]}}]}}]),
        containers: $containers,
        initContainers: $inits,
        dnsPolicy: "ClusterFirst",
        serviceAccountName: "default",
        serviceAccount: "default",
        securityContext: {},
        schedulerName: "default-scheduler",
        tolerations: [
          {key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute", tolerationSeconds: 300},
          {key: "node.kubernetes.io/unreachable", operator: "Exists", effect: "NoExecute", tolerationSeconds: 300}],
        priority: 0,
        enableServiceLinks: true,
        preemptionPolicy: "PreemptLowerPriority"
      }),
      status: {}
    },
    oldObject: null,
    dryRun: false,
    options: {kind: "CreateOptions", apiVersion: "meta.k8s.io/v1"}
  }
}
