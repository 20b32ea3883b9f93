//! An etcd server as a deployment runs it, started by the test: TLS only
//! (a CA, a server and a client certificate made here with rcgen), client
//! certificates required, and authentication on, with a user `grace`
//! whose role may read and write the keys under [`PREFIX`] only.
//!
//! The binary is `GRACE_ETCD_BIN`, else `etcd` on `PATH`; the ports are
//! free loopback ones, the data a temporary directory. The server is
//! killed when the value is dropped, and by the kernel (`setpriv
//! --pdeathsig`) if the thread that started it ends first.
#![allow(dead_code)] // each test file uses its own part

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// The user the tests connect as.
pub const USER: &str = "grace";

/// Its password.
pub const PASSWORD: &str = "correct horse battery staple";

/// The keys the user may read and write: every test prefix starts so.
pub const PREFIX: &str = "/grace-test/";

/// The PEM files of a test CA.
pub struct Certificates {
    /// The CA certificate.
    pub ca: PathBuf,
    /// The server's certificate (for 127.0.0.1 and localhost) and key.
    pub server_cert: PathBuf,
    /// The server's key.
    pub server_key: PathBuf,
    /// A client certificate the server accepts, and its key.
    pub client_cert: PathBuf,
    /// The client certificate's key.
    pub client_key: PathBuf,
    /// A client certificate from another CA, which the server refuses.
    pub stranger_cert: PathBuf,
    /// Its key.
    pub stranger_key: PathBuf,
}

fn ca(name: &str) -> (CertificateParams, KeyPair) {
    let key = KeyPair::generate().expect("a key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    (params, key)
}

fn leaf(
    names: &[&str],
    common_name: &str,
    usage: ExtendedKeyUsagePurpose,
    issuer: &Issuer<'_, KeyPair>,
) -> (String, String) {
    let key = KeyPair::generate().expect("a key");
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let mut params = CertificateParams::new(names).expect("params");
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![usage];
    let cert = params.signed_by(&key, issuer).expect("signed");
    (cert.pem(), key.serialize_pem())
}

impl Certificates {
    /// A new CA and certificates, written to `dir`.
    pub fn new(dir: &Path) -> Certificates {
        let write = |name: &str, pem: &str| {
            let path = dir.join(name);
            std::fs::write(&path, pem).expect("PEM written");
            path
        };
        let (ca_params, ca_key) = ca("grace test CA");
        let ca_pem = ca_params.self_signed(&ca_key).expect("self-signed").pem();
        let issuer = Issuer::new(ca_params, ca_key);
        let (server_cert, server_key) = leaf(
            &["127.0.0.1", "localhost"],
            "etcd",
            ExtendedKeyUsagePurpose::ServerAuth,
            &issuer,
        );
        // Not an etcd user's name: the certificate alone authenticates
        // nobody (etcd takes a client certificate's CN as the user when no
        // token comes with the request).
        let (client_cert, client_key) = leaf(
            &[],
            "grace-test-client",
            ExtendedKeyUsagePurpose::ClientAuth,
            &issuer,
        );
        let (other_params, other_key) = ca("another CA");
        let other = Issuer::new(other_params, other_key);
        let (stranger_cert, stranger_key) = leaf(
            &[],
            "grace-test-client",
            ExtendedKeyUsagePurpose::ClientAuth,
            &other,
        );
        Certificates {
            ca: write("ca.pem", &ca_pem),
            server_cert: write("server.pem", &server_cert),
            server_key: write("server-key.pem", &server_key),
            client_cert: write("client.pem", &client_cert),
            client_key: write("client-key.pem", &client_key),
            stranger_cert: write("stranger.pem", &stranger_cert),
            stranger_key: write("stranger-key.pem", &stranger_key),
        }
    }
}

/// A TLS-only, authenticating etcd member on loopback.
pub struct SecureEtcd {
    /// Certificates and data live here.
    pub dir: tempfile::TempDir,
    /// The certificates.
    pub certs: Certificates,
    /// The client port.
    pub port: u16,
    child: Child,
}

impl SecureEtcd {
    /// Starts the member, waits until it answers over TLS, then creates
    /// the users and turns authentication on.
    pub fn start() -> SecureEtcd {
        SecureEtcd::start_with(&[])
    }

    /// [`SecureEtcd::start`] with more etcd flags.
    pub fn start_with(flags: &[&str]) -> SecureEtcd {
        let binary = std::env::var_os("GRACE_ETCD_BIN")
            .map(PathBuf::from)
            .or_else(|| find_on_path("etcd"))
            .expect(
                "these tests start their own etcd: install etcd-server, or set GRACE_ETCD_BIN \
                 to the etcd binary",
            );
        let dir = tempfile::tempdir().expect("a temp dir");
        let certs = Certificates::new(dir.path());
        let port = free_port();
        let peer = format!("http://127.0.0.1:{}", free_port());
        let client = format!("https://127.0.0.1:{port}");
        let log = std::fs::File::create(dir.path().join("etcd.log")).expect("log file");
        let mut command = match find_on_path("setpriv") {
            Some(setpriv) => {
                let mut c = Command::new(setpriv);
                c.args(["--pdeathsig", "KILL", "--"]).arg(&binary);
                c
            }
            None => Command::new(&binary),
        };
        command
            .args(["--name", "grace-secure"])
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .arg("--initial-cluster")
            .arg(format!("grace-secure={peer}"))
            .arg("--cert-file")
            .arg(&certs.server_cert)
            .arg("--key-file")
            .arg(&certs.server_key)
            .arg("--trusted-ca-file")
            .arg(&certs.ca)
            .arg("--client-cert-auth")
            .args(flags)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log);
        let child = command.spawn().expect("etcd starts");
        let server = SecureEtcd {
            dir,
            certs,
            port,
            child,
        };
        server.enable_auth();
        server
    }

    /// The client URL.
    pub fn endpoint(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The TLS options of a client the server accepts.
    pub fn tls(&self) -> etcd_client::TlsOptions {
        let read = |p: &Path| std::fs::read(p).expect("PEM");
        etcd_client::TlsOptions::new()
            .ca_certificate(etcd_client::Certificate::from_pem(read(&self.certs.ca)))
            .identity(etcd_client::Identity::from_pem(
                read(&self.certs.client_cert),
                read(&self.certs.client_key),
            ))
    }

    /// Waits until the server answers over TLS, then: a `root` user (etcd
    /// needs one to enable authentication), a role that may read and write
    /// [`PREFIX`], the user [`USER`] with it, and authentication on.
    fn enable_auth(&self) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let started = Instant::now();
        runtime.block_on(async {
            let mut client = loop {
                let options = etcd_client::ConnectOptions::new()
                    .with_tls(self.tls())
                    .with_connect_timeout(Duration::from_secs(2));
                if let Ok(mut c) =
                    etcd_client::Client::connect([self.endpoint()], Some(options)).await
                    && c.status().await.is_ok()
                {
                    break c;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(30),
                    "etcd not up over TLS after 30 s:\n{}",
                    self.log_tail()
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            };
            client
                .user_add("root", "root-password", None)
                .await
                .expect("root user");
            client
                .user_grant_role("root", "root")
                .await
                .expect("root role");
            client.role_add("grace-store").await.expect("role");
            client
                .role_grant_permission(
                    "grace-store",
                    etcd_client::Permission::read_write(PREFIX).with_prefix(),
                )
                .await
                .expect("permission");
            client.user_add(USER, PASSWORD, None).await.expect("user");
            client
                .user_grant_role(USER, "grace-store")
                .await
                .expect("role granted");
            client.auth_enable().await.expect("auth enabled");
        });
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for SecureEtcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|c| {
            c.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

impl SecureEtcd {
    /// A store client's options on `prefix` (under [`PREFIX`]) with
    /// everything the server asks for: TLS, the client certificate, the
    /// user and its password.
    pub fn store_options(&self, prefix: &str) -> grace_std::store::EtcdOptions {
        grace_std::store::EtcdOptions {
            prefix: prefix.to_owned(),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(5),
            tls: Some(self.store_tls(&self.certs.client_cert, &self.certs.client_key)),
            auth: Some(grace_std::store::EtcdAuth {
                user: USER.into(),
                password: PASSWORD.into(),
            }),
            ..grace_std::store::EtcdOptions::new([self.endpoint()])
        }
    }

    /// TLS trusting the test CA, with the client certificate `cert`.
    pub fn store_tls(&self, cert: &Path, key: &Path) -> grace_std::store::EtcdTls {
        grace_std::store::EtcdTls::from_files(&self.certs.ca, Some((cert, key))).expect("PEM files")
    }
}
