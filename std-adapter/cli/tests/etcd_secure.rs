//! `grace agent --etcd` and the store commands against an etcd as a
//! deployment runs it (TLS only, client certificates, authentication on:
//! `tests/common/secure_etcd.rs`), as a user runs them: the certificate
//! files and the user from flags or variables, the password from a file or
//! a variable. Without them the agent and the commands are refused.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]
#![cfg(feature = "etcd")]

#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "../../tests/common/secure_etcd.rs"]
mod secure_etcd;

use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::{alive, wait_for};
use grace_std::store::{EtcdStore, Store};
use secure_etcd::{PASSWORD, SecureEtcd, USER};

const GRACE: &str = env!("CARGO_BIN_EXE_grace");
const PREFIX: &str = "/grace-test/cli/";

/// `grace` with none of the etcd variables this test does not set.
fn bare() -> Command {
    let mut c = Command::new(GRACE);
    for var in [
        "GRACE_ETCD_PASSWORD",
        "GRACE_ETCD_PASSWORD_FILE",
        "GRACE_ETCD_CACERT",
        "GRACE_ETCD_CERT",
        "GRACE_ETCD_KEY",
        "GRACE_ETCD_USER",
    ] {
        c.env_remove(var);
    }
    c
}

/// `grace ARGS --etcd .. ` with the certificates as flags and the user
/// and password file as variables (the agent's way).
fn with_flags(server: &SecureEtcd, args: &[&str]) -> Command {
    let password = server.dir.path().join("password");
    std::fs::write(&password, format!("{PASSWORD}\n")).expect("written");
    let mut c = bare();
    c.args(args)
        .args(["--etcd", &server.endpoint(), "--etcd-prefix", PREFIX])
        .arg("--data-dir")
        .arg(server.dir.path().join("data"))
        .arg("--etcd-cacert")
        .arg(&server.certs.ca)
        .arg("--etcd-cert")
        .arg(&server.certs.client_cert)
        .arg("--etcd-key")
        .arg(&server.certs.client_key)
        .env("GRACE_ETCD_USER", USER)
        .env("GRACE_ETCD_PASSWORD_FILE", &password);
    c
}

/// `grace ARGS --etcd ..` with everything from variables (the password
/// too).
fn with_env(server: &SecureEtcd, args: &[&str]) -> Output {
    bare()
        .args(args)
        .args(["--etcd", &server.endpoint(), "--etcd-prefix", PREFIX])
        .env("GRACE_ETCD_CACERT", &server.certs.ca)
        .env("GRACE_ETCD_CERT", &server.certs.client_cert)
        .env("GRACE_ETCD_KEY", &server.certs.client_key)
        .env("GRACE_ETCD_USER", USER)
        .env("GRACE_ETCD_PASSWORD", PASSWORD)
        .output()
        .expect("grace runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

#[test]
#[ignore = "starts its own etcd with TLS and auth (GRACE_ETCD_BIN or etcd on PATH); .ci/etcd runs it"]
fn etcd_tls_auth_the_agent_and_commands_work_with_certificates_and_password() {
    let server = SecureEtcd::start();
    let agent = Agent(
        with_flags(&server, &["agent", "--node", "node-a", "--lease-ttl", "3"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("agent starts"),
    );
    let store = EtcdStore::connect_with(server.store_options(PREFIX)).expect("served");
    wait_for("node-a registered", Duration::from_secs(15), || {
        store
            .alive_nodes()
            .is_ok_and(|nodes| nodes.iter().any(|n| n == "node-a"))
    });

    let pid = server.dir.path().join("web.pid");
    let file = server.dir.path().join("web.json");
    std::fs::write(
        &file,
        format!(
            r#"{{"metadata":{{"name":"web"}},
                "spec":{{"nodeName":"node-a","terminationGracePeriodSeconds":5,
                        "containers":[{{"name":"app","command":["sh","-c","echo $$ > {pid}; trap 'exit 0' TERM; while :; do sleep 0.05; done"]}}]}}}}"#,
            pid = pid.display()
        ),
    )
    .expect("written");
    let out = with_env(&server, &["apply", "-f", file.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    wait_for("web runs on node-a", Duration::from_secs(15), || {
        alive(&pid)
    });

    let out = with_env(&server, &["delete", "web"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    wait_for("web removed", Duration::from_secs(15), || {
        store.get("web").is_ok_and(|o| o.is_none())
    });
    drop(agent);
}

#[test]
#[ignore = "starts its own etcd with TLS and auth (GRACE_ETCD_BIN or etcd on PATH); .ci/etcd runs it"]
fn etcd_tls_auth_without_the_password_or_certificates_the_agent_and_commands_are_refused() {
    let server = SecureEtcd::start();

    // No password: the agent stops at once, saying why.
    let mut agent = with_flags(&server, &["agent", "--node", "node-a"]);
    agent.env_remove("GRACE_ETCD_PASSWORD_FILE");
    let out = agent.output().expect("runs");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("GRACE_ETCD_PASSWORD"));

    // A wrong password: refused by etcd, exit 1.
    let wrong = server.dir.path().join("wrong");
    std::fs::write(&wrong, "guess\n").expect("written");
    let mut agent = with_flags(&server, &["agent", "--node", "node-a"]);
    agent.env("GRACE_ETCD_PASSWORD_FILE", &wrong);
    let out = agent.output().expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("authentication failed"),
        "{}",
        text(&out.stderr)
    );

    // No TLS at all: refused before anything is sent.
    let out = bare()
        .args(["get", "--etcd", &server.endpoint(), "--etcd-prefix", PREFIX])
        .output()
        .expect("runs");
    assert_ne!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains("--etcd-cacert"),
        "{}",
        text(&out.stderr)
    );

    // TLS, but no client certificate: the handshake fails.
    let out = bare()
        .args(["get", "--etcd", &server.endpoint(), "--etcd-prefix", PREFIX])
        .arg("--etcd-cacert")
        .arg(&server.certs.ca)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));

    // The password never on the command line.
    let out = with_flags(&server, &["get", "--etcd-user", "grace:secret"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("never on the command line"));

    // With everything: served.
    let out = with_env(&server, &["get"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // An empty list says so on stderr, as kubectl does; nothing else there.
    assert_eq!(text(&out.stderr).trim(), "No resources found");
}
