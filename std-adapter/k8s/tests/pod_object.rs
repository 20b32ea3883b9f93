//! `pod_object` (feature `store`): a Pod as the object a grace-std store
//! holds, and back, with the fields grace refuses named.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use grace_k8s::pod_object::{check_label, ignored_fields, to_object, to_pod};
use k8s_openapi::api::core::v1::Pod;

fn pod(json: serde_json::Value) -> Pod {
    serde_json::from_value(json).expect("a valid Pod")
}

fn web() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "labels": {"app": "web"}, "finalizers": ["example.com/keep"]},
        "spec": {
            "nodeName": "node-a",
            "containers": [{
                "name": "app", "image": "nginx", "command": ["sleep"], "args": ["1000"],
                "lifecycle": {
                    "preStop": {"exec": {"command": ["sh", "-c", "sleep 2"]}},
                    "stopSignal": "SIGUSR1"
                }
            }],
            "initContainers": [{"name": "proxy", "command": ["sleep", "1000"], "restartPolicy": "Always"}]
        }
    })
}

#[test]
fn a_pod_becomes_a_stored_object_sidecar_first_and_shows_as_the_same_pod() {
    let converted = to_object(&pod(web())).expect("grace runs it");
    assert_eq!(converted.name, "web");
    let object = &converted.object;
    // R18: no terminationGracePeriodSeconds is the API's default, 30 s.
    assert_eq!(object.record.termination_grace_period_seconds, Some(30));
    let names: Vec<&str> = object.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["proxy", "app"]);
    let app = &object.containers[1];
    assert_eq!(app.command, ["sleep", "1000"]);
    assert_eq!(app.pre_stop.as_deref(), Some("sleep 2"));
    assert_eq!(app.stop_signal, Some(10), "SIGUSR1 on Linux");
    assert!(object.containers[0].sidecar);

    let shown = to_pod("web", object);
    let spec = shown.spec.expect("a spec");
    assert_eq!(spec.node_name.as_deref(), Some("node-a"));
    let app = &spec.containers[0];
    let lifecycle = app.lifecycle.as_ref().expect("a lifecycle");
    assert_eq!(lifecycle.stop_signal.as_deref(), Some("SIGUSR1"));
    let exec = lifecycle.pre_stop.as_ref().and_then(|h| h.exec.as_ref());
    assert_eq!(
        exec.and_then(|e| e.command.clone()),
        Some(vec!["sh".into(), "-c".into(), "sleep 2".into()])
    );
    let sidecars = spec.init_containers.expect("the sidecar");
    assert_eq!(sidecars[0].restart_policy.as_deref(), Some("Always"));
    assert_eq!(
        shown.metadata.finalizers,
        Some(vec!["example.com/keep".into()])
    );
    // Nothing ran it yet: running, ready (no deletion requested).
    let status = shown.status.expect("a status");
    let app = &status.container_statuses.expect("statuses")[0];
    assert!(app.ready);
}

#[test]
fn what_grace_cannot_run_is_refused_naming_the_field() {
    let cases = [
        (
            "/spec/containers/0",
            serde_json::json!({"name": "app", "image": "nginx"}),
            "spec.containers[0].command",
        ),
        (
            "/spec/containers/0/envFrom",
            serde_json::json!([{"configMapRef": {"name": "settings"}}]),
            "spec.containers[0].envFrom",
        ),
        (
            "/spec/containers/0/env",
            serde_json::json!([{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]),
            "spec.containers[0].env[0].valueFrom.secretKeyRef",
        ),
        (
            "/spec/containers/0/env",
            serde_json::json!([{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]),
            "spec.containers[0].env[0].valueFrom.configMapKeyRef",
        ),
        (
            "/spec/containers/0/env",
            serde_json::json!([{"name": "A", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}]),
            "spec.containers[0].env[0].valueFrom.resourceFieldRef",
        ),
        (
            "/spec/containers/0/env",
            serde_json::json!([{"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]),
            "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath",
        ),
        (
            "/spec/containers/0/env",
            serde_json::json!([{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['a']"}}}]),
            "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath",
        ),
        (
            "/spec/containers/0/workingDir",
            serde_json::json!("relative/dir"),
            "spec.containers[0].workingDir",
        ),
        (
            "/spec/containers/0/securityContext",
            serde_json::json!({"runAsUser": -1}),
            "spec.containers[0].securityContext.runAsUser",
        ),
        (
            "/spec/containers/0/lifecycle/postStart",
            serde_json::json!({"httpGet": {"port": 80}}),
            "spec.containers[0].lifecycle.postStart",
        ),
        (
            "/spec/containers/0/lifecycle/preStop",
            serde_json::json!({"httpGet": {"port": 80}}),
            "spec.containers[0].lifecycle.preStop",
        ),
        (
            "/spec/initContainers/0/restartPolicy",
            serde_json::json!(null),
            "spec.initContainers[0].restartPolicy",
        ),
        (
            "/spec/containers/0/lifecycle/stopSignal",
            serde_json::json!("SIGNOPE"),
            "spec.containers[0].lifecycle.stopSignal",
        ),
        (
            "/metadata/name",
            serde_json::json!("Web_1"),
            "metadata.name",
        ),
        (
            "/metadata/labels",
            serde_json::json!({"app": "-web"}),
            "metadata.labels.app",
        ),
    ];
    for (pointer, value, field) in cases {
        let mut json = web();
        let (parent, key) = pointer.rsplit_once('/').expect("a pointer");
        let parent = json.pointer_mut(parent).expect("the parent exists");
        match key.parse::<usize>() {
            Ok(i) => parent[i] = value,
            Err(_) => parent[key] = value,
        }
        let err = to_object(&pod(json)).expect_err(field);
        assert_eq!(err.path, field, "{err}");
    }
}

#[test]
fn a_negative_grace_is_taken_as_1_with_a_warning() {
    let mut json = web();
    json["spec"]["terminationGracePeriodSeconds"] = serde_json::json!(-5);
    let converted = to_object(&pod(json)).expect("accepted");
    assert_eq!(
        converted.object.record.termination_grace_period_seconds,
        Some(1)
    );
    assert_eq!(converted.warnings.len(), 1, "{:?}", converted.warnings);
}

#[test]
fn fields_grace_does_not_act_on_are_listed() {
    assert_eq!(
        ignored_fields(&pod(web())),
        ["spec.containers[*].image"],
        "apiVersion, kind and every field grace acts on are not listed"
    );
}

#[test]
fn labels_are_checked_as_kubernetes_checks_them() {
    assert!(check_label("example.com/app", "web-1").is_ok());
    assert!(check_label("app", "").is_ok());
    assert!(check_label("/app", "web").is_err());
    assert!(check_label("app", "web-").is_err());
    assert!(check_label(&"a".repeat(64), "").is_err());
}

#[test]
fn an_object_without_a_node_shows_as_waiting_unscheduled() {
    let mut json = web();
    json["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("nodeName");
    let converted = to_object(&pod(json)).expect("accepted");
    let shown = to_pod("web", &converted.object);
    let status = shown.status.expect("a status");
    // No kubelet has seen it: Pending, and only the scheduler's condition.
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    let conditions = status.conditions.clone().expect("conditions");
    assert_eq!(conditions.len(), 1, "{conditions:?}");
    assert_eq!(conditions[0].type_, "PodScheduled");
    assert_eq!(conditions[0].status, "False");
    assert_eq!(conditions[0].reason.as_deref(), Some("Unschedulable"));
    let statuses = status.container_statuses.expect("statuses");
    let waiting = statuses[0].state.as_ref().and_then(|s| s.waiting.as_ref());
    assert_eq!(
        waiting.and_then(|w| w.reason.as_deref()),
        Some("Unscheduled")
    );
}

#[test]
fn env_working_dir_and_the_merged_security_context_are_kept_and_shown_back() {
    use grace_std::store::{EnvVar, SecurityContext};
    let mut json = web();
    json["metadata"]["uid"] = serde_json::json!("uid-web");
    json["spec"]["securityContext"] = serde_json::json!(
        {"runAsUser": 1000, "runAsGroup": 2000, "runAsNonRoot": true, "supplementalGroups": [3000], "fsGroup": 1}
    );
    json["spec"]["containers"][0]["securityContext"] =
        serde_json::json!({"runAsUser": 65534, "runAsNonRoot": false});
    json["spec"]["containers"][0]["workingDir"] = serde_json::json!("/srv/app");
    json["spec"]["containers"][0]["env"] = serde_json::json!([
        {"name": "GREETING", "value": "hello"},
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "APP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels['app']"}}}
    ]);
    json["spec"]["containers"][0]["lifecycle"]["postStart"] =
        serde_json::json!({"exec": {"command": ["touch", "/tmp/started"]}});
    let pod = pod(json);
    let converted = to_object(&pod).expect("grace runs it");
    let app = &converted.object.containers[1];
    assert_eq!(
        app.env,
        vec![
            EnvVar::value("GREETING", "hello"),
            EnvVar::field_ref("POD", "metadata.name"),
            EnvVar::field_ref("APP", "metadata.labels['app']"),
        ]
    );
    assert_eq!(app.working_dir.as_deref(), Some("/srv/app"));
    assert_eq!(app.post_start.as_deref(), Some("touch /tmp/started"));
    // The container's runAsUser and runAsNonRoot win; runAsGroup and
    // supplementalGroups are the pod's, as the kubelet merges them.
    assert_eq!(
        app.security_context,
        SecurityContext::default()
            .with_run_as_user(Some(65534))
            .with_run_as_group(Some(2000))
            .with_supplemental_groups(vec![3000])
            .with_run_as_non_root(Some(false))
    );
    let sidecar = &converted.object.containers[0];
    assert_eq!(sidecar.security_context.run_as_user, Some(1000));
    assert_eq!(sidecar.security_context.run_as_non_root, Some(true));
    // Ignored: only what grace does not act on.
    let ignored = ignored_fields(&pod);
    assert!(
        ignored.contains(&"spec.securityContext.fsGroup".to_owned()),
        "{ignored:?}"
    );
    assert!(
        !ignored
            .iter()
            .any(|f| f.contains("env") || f.contains("workingDir") || f.contains("runAs")),
        "{ignored:?}"
    );
    // Shown back, it converts to the same object.
    let shown = to_pod("web", &converted.object);
    let again = to_object(&shown).expect("shown back");
    assert_eq!(again.object.containers, converted.object.containers);
}

#[test]
fn kubectl_run_manifests_apply_with_args_only_or_with_command() {
    // `kubectl run web --image=busybox --dry-run=client -o yaml -- sh -c 'echo hi; sleep 1000'`
    let args_only = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"labels": {"run": "web"}, "name": "web"},
        "spec": {
            "containers": [{"args": ["sh", "-c", "echo hi; sleep 1000"], "image": "busybox", "name": "web", "resources": {}}],
            "dnsPolicy": "ClusterFirst", "restartPolicy": "Always"
        },
        "status": {}
    });
    let converted = to_object(&pod(args_only)).expect("applies");
    assert_eq!(
        converted.object.containers[0].command,
        ["sh", "-c", "echo hi; sleep 1000"]
    );
    // The same with `--command -- sleep 1000`.
    let command = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"labels": {"run": "web"}, "name": "web"},
        "spec": {
            "containers": [{"command": ["sleep", "1000"], "image": "busybox", "name": "web", "resources": {}}],
            "dnsPolicy": "ClusterFirst", "restartPolicy": "Always"
        },
        "status": {}
    });
    let converted = to_object(&pod(command)).expect("applies");
    assert_eq!(converted.object.containers[0].command, ["sleep", "1000"]);
}

#[test]
fn the_pod_is_kept_whole_and_shown_as_applied_with_graces_fields_over_it() {
    let mut applied = web();
    applied["metadata"]["annotations"] = serde_json::json!({"note": "kept"});
    applied["metadata"]["namespace"] = "default".into();
    applied["spec"]["containers"][0]["resources"] = serde_json::json!({"limits": {"cpu": "500m"}});
    applied["spec"]["volumes"] = serde_json::json!([{"name": "cache", "emptyDir": {}}]);
    let mut object = to_object(&pod(applied.clone()))
        .expect("grace runs it")
        .object;
    let kept = object
        .manifest
        .as_ref()
        .expect("kept")
        .to_json()
        .expect("JSON");
    // Kept once, without what the object holds beside it.
    assert_eq!(kept["metadata"].get("labels"), None);
    assert_eq!(kept["spec"].get("nodeName"), None);
    // Bound elsewhere since: grace's fields win.
    object.node = Some("node-b".into());
    let shown = serde_json::to_value(to_pod("web", &object)).expect("JSON");
    assert_eq!(
        shown["metadata"]["annotations"],
        applied["metadata"]["annotations"]
    );
    assert_eq!(shown["metadata"]["namespace"], "default");
    assert_eq!(shown["metadata"]["labels"], applied["metadata"]["labels"]);
    assert_eq!(
        shown["metadata"]["finalizers"],
        serde_json::json!(["example.com/keep"])
    );
    assert_eq!(shown["spec"]["nodeName"], "node-b");
    assert_eq!(shown["spec"]["terminationGracePeriodSeconds"], 30);
    assert_eq!(shown["spec"]["volumes"], applied["spec"]["volumes"]);
    assert_eq!(shown["spec"]["containers"], applied["spec"]["containers"]);
    assert_eq!(shown["status"]["containerStatuses"][0]["image"], "nginx");
    // An object stored before the Pod was kept shows grace's fields.
    object.manifest = None;
    let older = serde_json::to_value(to_pod("web", &object)).expect("JSON");
    assert_eq!(older["spec"]["containers"][0].get("image"), None);
    assert_eq!(
        older["spec"]["containers"][0]["command"],
        serde_json::json!(["sleep", "1000"])
    );
}
