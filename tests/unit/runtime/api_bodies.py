"""Bodies as the API server answers them, for the tests of decoding and of the client."""

from __future__ import annotations

import json
import math
from typing import Any


def exact(value: Any) -> Any:
    """``value`` with every scalar's type spelled out: ``1``, ``1.0`` and ``True`` differ, and a
    NaN equals itself."""
    if isinstance(value, dict):
        return ("dict", [(key, exact(item)) for key, item in value.items()])
    if isinstance(value, list):
        return ("list", [exact(item) for item in value])
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else repr(value))
    return (type(value).__name__, value)


# Bodies as the API server writes them (Go's encoding/json: compact, UTF-8, `<`, `>` and `&`
# escaped), trimmed from a local cluster's answers.
POD = (
    b'{"kind":"Pod","apiVersion":"v1","metadata":{"name":"pi-worker-0","namespace":"default",'
    b'"uid":"3f0623a5-9b7c-40b1-924b-d9a8be80c282","resourceVersion":"424","generation":1,'
    b'"creationTimestamp":"2026-11-27T01:24:58Z","labels":{"training.kubeflow.org/job-name":"pi",'
    b'"training.kubeflow.org/job-role":"worker","training.kubeflow.org/replica-index":"0"},'
    b'"ownerReferences":[{"apiVersion":"kubeflow.org/v2beta1","kind":"MPIJob","name":"pi",'
    b'"uid":"ab7b0ce6-4ecd-45ea-ae25-a1b08103ecb1","controller":true,"blockOwnerDeletion":true}],'
    b'"managedFields":[{"manager":"mpi-operator","operation":"Update","apiVersion":"v1",'
    b'"time":"2026-11-27T01:24:58Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":'
    b'{".":{},"f:training.kubeflow.org/job-name":{}},"f:ownerReferences":{".":{},'
    b'"k:{\\"uid\\":\\"ab7b0ce6-4ecd-45ea-ae25-a1b08103ecb1\\"}":{}}}}}]},"spec":{"volumes":'
    b'[{"name":"ssh-auth","secret":{"secretName":"pi-ssh","items":[{"key":"ssh-privatekey",'
    b'"path":"id_rsa"}],"defaultMode":384}}],"containers":[{"name":"worker","image":'
    b'"mpioperator/mpi-pi:openmpi","command":["/usr/sbin/sshd","-De"],"resources":{"requests":'
    b'{"cpu":"10m","memory":"16Mi"}},"terminationMessagePath":"/dev/termination-log",'
    b'"imagePullPolicy":"IfNotPresent"}],"restartPolicy":"Never",'
    b'"terminationGracePeriodSeconds":0,"dnsPolicy":"ClusterFirst","securityContext":{},'
    b'"hostname":"pi-worker-0","subdomain":"pi","tolerations":[{"key":'
    b'"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute",'
    b'"tolerationSeconds":300}],"priority":0},"status":{"phase":"Running","conditions":'
    b'[{"type":"Ready","status":"True","lastProbeTime":null,'
    b'"lastTransitionTime":"2026-11-27T01:24:58Z"}],"hostIP":"10.0.0.1","podIP":"10.244.0.4",'
    b'"startTime":"2026-11-27T01:24:58Z","containerStatuses":[{"name":"worker","state":'
    b'{"running":{"startedAt":"2026-11-27T01:24:58Z"}},"ready":true,"restartCount":0,'
    b'"image":"mpioperator/mpi-pi:openmpi","imageID":"","started":true}]}}'
)
JOB = (
    b'{"kind":"Job","apiVersion":"batch/v1","metadata":{"name":"pi-launcher","namespace":'
    b'"default","uid":"8ae9e203-1130-46dd-8761-9d6c15e18f6f","resourceVersion":"393",'
    b'"generation":1,"labels":{"app":"pi"}},"spec":{"parallelism":1,"completions":1,'
    b'"backoffLimit":6,"manualSelector":false,"template":{"metadata":{"annotations":'
    b'{"note":"a \\u003c b \\u0026\\u0026 c \\u003e d \\u2028"}},"spec":{"containers":[{"name":'
    b'"launcher","image":"mpioperator/mpi-pi:openmpi","env":[{"name":"OMPI_MCA_plm_rsh_args",'
    b'"value":"-o ConnectionAttempts=10"}]}],"restartPolicy":"OnFailure"}},"suspend":false},'
    b'"status":{"startTime":"2026-11-27T01:24:58Z","active":1,"ready":0,"terminating":0,'
    b'"uncountedTerminatedPods":{}}}'
)
MPIJOB = (
    '{"apiVersion":"kubeflow.org/v2beta1","kind":"MPIJob","metadata":{"name":"π-训练",'
    '"namespace":"default","uid":"067653ec-1057-4527-9ad6-e6752462e244","resourceVersion":'
    '"2133","annotations":{"note":"Grüße, 😀 \\ud83d\\ude00 \\t\\"quoted\\"\\\\ \\/"}},'
    '"spec":{"slotsPerWorker":1,"runPolicy":{"cleanPodPolicy":"Running",'
    '"activeDeadlineSeconds":9223372036854775807,"backoffLimit":-9223372036854775808},'
    '"x-extension":{"big":123456789012345678901234567890,"beyondUint64":18446744073709552000,'
    '"negative":-99999999999999999999,"float":1.5e300,"tiny":5e-324,"negZero":-0.0,'
    '"exp":1E+2,"null":null,"empty":{},"list":[]},"mpiReplicaSpecs":{"Worker":{"replicas":2}}},'
    '"status":{"conditions":[{"type":"Created","status":"True","reason":"MPIJobCreated",'
    '"message":"MPIJob default/π-训练 is created: ünïcödé ✓","lastTransitionTime":'
    '"2026-11-27T01:24:57Z"}],"replicaStatuses":{"Launcher":{"active":1},"Worker":'
    '{"active":2,"succeeded":0}},"startTime":"2026-11-27T01:24:57Z"}}'
).encode()
STATUS = (
    b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
    b'"pods \\"pi-worker-0\\" already exists","reason":"AlreadyExists","details":{"name":'
    b'"pi-worker-0","kind":"pods"},"code":409}'
)
EXPIRED = (
    b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
    b'"too old resource version: 5 (2133)","reason":"Expired","code":410}'
)

BOOKMARK = (
    b'{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"2300","annotations":'
    b'{"k8s.io/initial-events-end":"true"}},"spec":{"containers":null},"status":{}}'
)


def event(kind: bytes, obj: bytes) -> bytes:
    return b'{"type":"' + kind + b'","object":' + obj + b"}"


BODIES = {
    "pod": POD,
    "job": JOB,
    "mpijob": MPIJOB,
    "status": STATUS,
    "list": b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"2200",'
    b'"continue":"eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MjIwMH0","remainingItemCount":1},'
    b'"items":[' + POD + b"," + POD + b"]}",
    "empty list": b'{"kind":"JobList","apiVersion":"batch/v1","metadata":{"resourceVersion":'
    b'"7"},"items":[]}',
    "added": event(b"ADDED", POD),
    "modified": event(b"MODIFIED", MPIJOB),
    "deleted": event(b"DELETED", JOB),
    "bookmark": event(b"BOOKMARK", BOOKMARK),
    "error": event(b"ERROR", EXPIRED),
    # The same object as Python's json.dumps writes it: spaces, everything else \u-escaped.
    "ascii-escaped": json.dumps(json.loads(MPIJOB)).encode(),
}
