//! grace's `-o jsonpath` templates against the real kubectl's: the same
//! object, the same templates, the same text (or both refuse).
//!
//! kubectl runs its JSONPath printer without a server on
//! `kubectl label --local -f FILE`; removing a label the object does not
//! have leaves the object as it was.

use std::process::Command;

use grace_cli::jsonpath::Template;

fn object() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web",
            "labels": {"app": "x", "app.kubernetes.io/name": "y"},
            "annotations": {"note": "a <b> & c"}
        },
        "spec": {"containers": [
            {"name": "a", "image": "busybox", "command": ["sleep", "1"]},
            {"name": "b", "image": "nginx", "ports": [{"containerPort": 80}]}
        ]},
        "status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "PodScheduled", "status": "True"}
        ]},
        "things": [
            {"metadata": {"name": "a"}, "n": 1, "f": 1.5, "b": true, "z": null, "h": "<&>",
             "big": 1234567.5, "small": 0.00001},
            {"metadata": {"name": "b"}, "n": 2, "huge": 1e21, "neg": -0.5, "e": [], "o": {}}
        ]
    })
}

const TEMPLATES: &[&str] = &[
    "{.metadata.name}",
    r#"{.metadata.name} {.spec.containers[*].name}{"\n"}"#,
    "{range .spec.containers[*]}[{.name}:{.image}]{end}",
    r#"{range .status.conditions[*]}{.type}={.status}{"\t"}{end}done"#,
    r"{.metadata.labels.app\.kubernetes\.io/name}",
    "{.metadata.labels}",
    "{.metadata.annotations.note}|{.metadata.annotations}",
    "{.spec.containers[0]}",
    "{.spec.containers[1].ports[0].containerPort}",
    "{range .things[*]}{.metadata.name}={.n},{.f},{.b},{.z};{end}",
    "{$.kind}|{@.kind}|{.things[*].n}",
    "{.things[*].e}{.things[1].o}",
    "{.things[0].big}|{.things[0].small}|{.things[1].huge}|{.things[1].neg}",
    "{.things}",
    "{.things[-1].n}|{.things[0:1].n}|{.things[-1:].n}|{.things[0:2:1].n}",
    "{.things[0,1].n}",
    "{.things[0]['metadata'].name}",
    "{.things[?(@.n==2)].metadata.name}",
    "{.things[?(@.n>1)].metadata.name}|{.things[?(@.n<=1)].metadata.name}",
    r#"{.things[?(@.metadata.name=="b")].n}|{.things[?(@.metadata.name!="a")].n}"#,
    "{.things[?(@.f==1.5)].n}",
    "{.things[?(@.z)].n}|{.things[?(@.b==true)].n}",
    r#"{.status.conditions[?(@.type=="Ready")].status}"#,
    "{.nope}|{.metadata.nope.deeper}|{.things[0].n.x}",
    "{range .empty[*]}x{end}after",
    "plain text only",
    // Refused by both.
    "{.things[3]}",
    "{.things[5:6].n}",
    "{.things[?(@.n==2.0)].n}",
    r#"{.things[?(@.n=="x")].n}"#,
    "{.a b}",
    "{.a",
    "{end}",
    "{.metadata[0]}",
];

#[test]
fn templates_print_what_kubectl_prints() {
    let Ok(version) = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
    else {
        eprintln!("kubectl is not installed: skipped");
        return;
    };
    assert!(version.status.success());
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("pod.json");
    let object = object();
    std::fs::write(&file, object.to_string()).expect("write the object");
    for template in TEMPLATES {
        let out = Command::new("kubectl")
            .env("KUBECONFIG", dir.path().join("none"))
            .args(["label", "--local", "-f"])
            .arg(&file)
            .args(["not-a-label-it-has-", "-o"])
            .arg(format!("jsonpath={template}"))
            .output()
            .expect("kubectl runs");
        let ours = Template::parse(template)
            .map_err(|e| e.to_string())
            .and_then(|t| t.render(&object).map_err(|e| e.to_string()));
        if out.status.success() {
            assert_eq!(
                ours.as_deref(),
                Ok(String::from_utf8_lossy(&out.stdout).as_ref()),
                "template {template}"
            );
        } else {
            assert!(
                ours.is_err(),
                "template {template}: kubectl refused it ({}), grace printed {ours:?}",
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .next()
                    .unwrap_or("")
            );
        }
    }
}
