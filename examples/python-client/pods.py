#!/usr/bin/env python3
"""The official Kubernetes Python client against a grace agent's API.

Lists the pods, deletes one with a grace period and watches until its
DELETED event, printing when each event came:

    grace agent --k8s-api 127.0.0.1:6443 --data-dir grace-data &
    python3 -m pip install kubernetes
    python3 examples/python-client/pods.py grace-data/kubeconfig web 3

Nothing but the kubeconfig the agent writes is needed (its CA, its
user's client certificate).
"""

import sys
import time

from kubernetes import client, config, watch


def main() -> int:
    if len(sys.argv) != 4:
        print(f"usage: {sys.argv[0]} KUBECONFIG POD GRACE_SECONDS", file=sys.stderr)
        return 2
    kubeconfig, name, grace = sys.argv[1], sys.argv[2], int(sys.argv[3])
    config.load_kube_config(config_file=kubeconfig)
    pods = client.CoreV1Api()

    listed = pods.list_namespaced_pod("default")
    for pod in listed.items:
        print(f"{pod.metadata.name}\t{pod.status.phase}")

    started = time.monotonic()
    answer = pods.delete_namespaced_pod(name, "default", grace_period_seconds=grace)
    print(f"delete: deletionTimestamp {answer.metadata.deletion_timestamp}, "
          f"grace {answer.metadata.deletion_grace_period_seconds} s")

    # From the list's revision: the changes since, the delete's among them.
    events = watch.Watch()
    for event in events.stream(pods.list_namespaced_pod, "default",
                               field_selector=f"metadata.name={name}",
                               resource_version=listed.metadata.resource_version,
                               timeout_seconds=grace + 30):
        took = time.monotonic() - started
        print(f"{took:6.2f} s  {event['type']}\t{event['object'].metadata.name}")
        if event["type"] == "DELETED":
            events.stop()
            return 0
    print(f"no DELETED event for {name}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
