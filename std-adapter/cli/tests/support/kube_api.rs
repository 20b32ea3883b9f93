//! The agent's Kubernetes API as the real kubectl (and curl, for what
//! kubectl never sends) reaches it: an agent serving `--k8s-api` on a
//! port of its own, and the clients set up for it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use super::common::{missing_tool, wait_for};
use super::{Agent, text};

/// An agent serving the API on a port of its own, and kubectl for it.
pub struct Api {
    /// The agent.
    pub agent: Agent,
    /// Its data directory.
    pub dir: tempfile::TempDir,
    /// `DATA_DIR/kubeconfig`, the agent's user's.
    pub kubeconfig: PathBuf,
}

/// Whether kubectl is missing (said; a failure under `CI=true`).
pub fn kubectl_missing() -> bool {
    let found = Command::new("kubectl")
        .args(["version", "--client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        missing_tool("kubectl is not installed (apt-get install kubectl)");
    }
    !found
}

impl Api {
    /// Starts the agent with `--k8s-api 127.0.0.1:0` and `extra`; ready
    /// once its kubeconfig is written (after the API's port is bound).
    pub fn start(extra: &[&str]) -> Api {
        let dir = tempfile::tempdir().unwrap();
        let mut args = vec!["--k8s-api", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let agent = Agent::start(dir.path(), &args);
        let kubeconfig = dir.path().join("kubeconfig");
        wait_for("the kubeconfig", Duration::from_secs(10), || {
            kubeconfig.exists()
        });
        Api {
            agent,
            dir,
            kubeconfig,
        }
    }

    /// The data directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// kubectl with `kubeconfig` and a cache of its own.
    pub fn command_as(&self, kubeconfig: &Path, args: &[&str]) -> Command {
        let mut command = Command::new("kubectl");
        command
            .env("KUBECONFIG", kubeconfig)
            .arg("--cache-dir")
            .arg(self.path().join("kube-cache"))
            .args(args);
        command
    }

    /// A kubeconfig for `user` in `group`, issued by `grace kubeconfig
    /// --user --group` from the agent's CA and written beside the data
    /// directory's; its path.
    pub fn user_kubeconfig(&self, user: &str, group: &str) -> PathBuf {
        let out = Command::new(super::GRACE)
            .args(["kubeconfig", "--user", user, "--group", group, "--data-dir"])
            .arg(self.path())
            .output()
            .expect("grace kubeconfig runs");
        assert!(out.status.success(), "{}", text(&out.stderr));
        let path = self.path().join(format!("{user}.kubeconfig"));
        std::fs::write(&path, &out.stdout).expect("the kubeconfig is written");
        path
    }

    /// kubectl with the agent's kubeconfig.
    pub fn command(&self, args: &[&str]) -> Command {
        self.command_as(&self.kubeconfig, args)
    }

    /// kubectl with the agent's kubeconfig, run.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("kubectl runs")
    }

    /// kubectl, which must succeed; its standard output.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}\n{}",
            text(&out.stderr),
            self.agent.log()
        );
        text(&out.stdout)
    }

    /// Writes a manifest and applies it, in `namespace` if given.
    pub fn apply(&self, namespace: Option<&str>, file: &str, manifest: &str) -> String {
        let path = self.path().join(file);
        std::fs::write(&path, manifest).unwrap();
        let mut args = Vec::new();
        if let Some(ns) = namespace {
            args.extend(["-n", ns]);
        }
        args.extend(["apply", "-f", path.to_str().unwrap()]);
        self.ok(&args)
    }

    /// A request through curl with the client certificate of
    /// `kubeconfig`: the HTTP code and the body, parsed.
    pub fn curl(
        &self,
        kubeconfig: &Path,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> (u16, serde_json::Value) {
        let config = std::fs::read_to_string(kubeconfig).unwrap();
        let field = |name: &str| {
            config
                .lines()
                .find_map(|l| l.trim().strip_prefix(name).map(str::to_owned))
                .unwrap()
        };
        let file = |name: &str, b64: String| {
            let out = Command::new("base64")
                .args(["-d"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .and_then(|mut c| {
                    use std::io::Write;
                    c.stdin.take().unwrap().write_all(b64.as_bytes())?;
                    c.wait_with_output()
                })
                .unwrap();
            let path = self.path().join(name);
            std::fs::write(&path, out.stdout).unwrap();
            path
        };
        let ca = file("curl-ca.crt", field("certificate-authority-data: "));
        let cert = file("curl.crt", field("client-certificate-data: "));
        let key = file("curl.key", field("client-key-data: "));
        let url = format!("{}{path}", field("server: "));
        let mut command = Command::new("curl");
        command
            .args(["-sS", "-X", method, "-w", "\n%{http_code}", "--cacert"])
            .arg(&ca)
            .arg("--cert")
            .arg(&cert)
            .arg("--key")
            .arg(&key)
            .args(["-H", "Content-Type: application/json"]);
        if let Some(body) = body {
            command.args(["--data-binary", body]);
        }
        let out = command.arg(&url).output().expect("curl runs");
        let all = text(&out.stdout);
        let (body, code) = all.trim_end().rsplit_once('\n').unwrap_or(("", &all));
        let code = code
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("curl: {all}"));
        let body = serde_json::from_str(body).unwrap_or(serde_json::Value::Null);
        (code, body)
    }
}
