//! The API's certificates and the kubeconfig: a CA the agent makes at its
//! first start and keeps private, a server certificate it signs for the
//! listening address, and a client certificate for the agent's own user.
//!
//! Files, in `<data-dir>/k8s-api/` (the directory `0700`, each file
//! `0600`): `ca.crt`, `ca.key`, `client.crt`, `client.key` are made once
//! and kept; `server.crt`, `server.key` are made again at every start (the
//! address may have changed). `<data-dir>/kubeconfig` (`0600`) is written
//! at every start: the CA, the server's URL, the client certificate and
//! key, a current context.
//!
//! [`user_kubeconfig`] issues a kubeconfig for another user (`grace
//! kubeconfig --user NAME --group GROUP`): only the agent's owner can, as
//! only it can read the CA's key.

use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::AgentError;

/// The directory of the API's certificates, in the data directory.
pub const CERT_DIR: &str = "k8s-api";

/// The kubeconfig's file name, in the data directory.
pub const KUBECONFIG: &str = "kubeconfig";

/// The CA's subject: the same at every start, so that a kept key signs
/// as the same issuer.
const CA_NAME: &str = "grace-agent-ca";

fn cert_error(context: &str, e: impl std::fmt::Display) -> AgentError {
    AgentError::io(
        format!("k8s-api certificates: {context}"),
        std::io::Error::other(e.to_string()),
    )
}

/// Writes `contents` to `path`, mode `0600` whatever the umask, replacing
/// what was there (through a file beside it, renamed).
pub(crate) fn write_private(path: &Path, contents: &[u8]) -> Result<(), AgentError> {
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let io = |e| AgentError::io(path.display().to_string(), e);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(io)?;
    file.write_all(contents).map_err(io)?;
    file.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// The CA's parameters (a kept key signs with these as the issuer).
fn ca_params() -> Result<CertificateParams, AgentError> {
    let mut params =
        CertificateParams::new(Vec::<String>::new()).map_err(|e| cert_error("CA", e))?;
    params.distinguished_name.push(DnType::CommonName, CA_NAME);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(params)
}

/// A key kept in `path`, made (and written `0600`) if there is none.
fn kept_key(path: &Path) -> Result<(KeyPair, bool), AgentError> {
    match std::fs::read_to_string(path) {
        Ok(pem) => Ok((
            KeyPair::from_pem(&pem).map_err(|e| cert_error("key", e))?,
            false,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = KeyPair::generate().map_err(|e| cert_error("key", e))?;
            write_private(path, key.serialize_pem().as_bytes())?;
            Ok((key, true))
        }
        Err(e) => Err(AgentError::io(path.display().to_string(), e)),
    }
}

/// The certificates an API server uses, loaded or made.
pub(crate) struct Certificates {
    /// The server's configuration: its certificate, and client
    /// certificates required, signed by the CA.
    pub server: Arc<rustls::ServerConfig>,
    /// The kubeconfig written.
    pub kubeconfig: PathBuf,
}

/// Loads the CA (making it at the first start), signs a server
/// certificate for `addr`, makes the agent user's client certificate at
/// the first start, and writes the kubeconfig.
pub(crate) fn prepare(
    data_dir: &Path,
    addr: SocketAddr,
    user: &str,
) -> Result<Certificates, AgentError> {
    let dir = data_dir.join(CERT_DIR);
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(AgentError::io(dir.display().to_string(), e)),
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| AgentError::io(dir.display().to_string(), e))?;
    let (ca_key, _) = kept_key(&dir.join("ca.key"))?;
    let params = ca_params()?;
    let ca_cert = params
        .self_signed(&ca_key)
        .map_err(|e| cert_error("CA", e))?;
    // The CA certificate is kept as first made: clients hold it.
    let ca_path = dir.join("ca.crt");
    let ca_pem = match std::fs::read_to_string(&ca_path) {
        Ok(pem) => pem,
        Err(_) => {
            write_private(&ca_path, ca_cert.pem().as_bytes())?;
            ca_cert.pem()
        }
    };
    let issuer = Issuer::new(params, ca_key);

    let server_key = KeyPair::generate().map_err(|e| cert_error("server key", e))?;
    let server_cert = server_params(addr)?
        .signed_by(&server_key, &issuer)
        .map_err(|e| cert_error("server", e))?;
    write_private(&dir.join("server.crt"), server_cert.pem().as_bytes())?;
    write_private(
        &dir.join("server.key"),
        server_key.serialize_pem().as_bytes(),
    )?;

    let (client_pem, client_key) = client_certificate(&dir, user, &issuer)?;
    let server = server_config(&ca_pem, server_cert.der().clone(), &server_key)?;
    let kubeconfig = data_dir.join(KUBECONFIG);
    let text = kubeconfig_text(&ca_pem, &server_url(addr), user, &client_pem, &client_key);
    write_private(&kubeconfig, text.as_bytes())?;
    Ok(Certificates { server, kubeconfig })
}

/// The server certificate's names: the address listened on, and the
/// loopback names when it listens on every address.
fn server_params(addr: SocketAddr) -> Result<CertificateParams, AgentError> {
    let mut names = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    if !addr.ip().is_unspecified() {
        names.push(addr.ip().to_string());
    }
    if let Ok(host) = rustix::system::uname().nodename().to_str() {
        names.push(host.to_owned());
    }
    let mut params = CertificateParams::new(names).map_err(|e| cert_error("server", e))?;
    params
        .distinguished_name
        .push(DnType::CommonName, "grace-agent");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    Ok(params)
}

/// The agent user's client certificate (CN = the user), made once.
fn client_certificate(
    dir: &Path,
    user: &str,
    issuer: &Issuer<'_, KeyPair>,
) -> Result<(String, String), AgentError> {
    let (key, made) = kept_key(&dir.join("client.key"))?;
    let cert_path = dir.join("client.crt");
    if !made && let Ok(pem) = std::fs::read_to_string(&cert_path) {
        return Ok((pem, key.serialize_pem()));
    }
    let cert = user_params(user, &[])?
        .signed_by(&key, issuer)
        .map_err(|e| cert_error("client", e))?;
    write_private(&cert_path, cert.pem().as_bytes())?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A client certificate's parameters: CN = the user, one O per group (the
/// Kubernetes convention).
pub(crate) fn user_params(user: &str, groups: &[&str]) -> Result<CertificateParams, AgentError> {
    let mut params =
        CertificateParams::new(Vec::<String>::new()).map_err(|e| cert_error("client", e))?;
    params.distinguished_name.push(DnType::CommonName, user);
    for group in groups {
        params
            .distinguished_name
            .push(DnType::OrganizationName, *group);
    }
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    Ok(params)
}

/// TLS for the server: its certificate, and a client certificate signed
/// by the CA required of every client (no anonymous request).
fn server_config(
    ca_pem: &str,
    cert: CertificateDer<'static>,
    key: &KeyPair,
) -> Result<Arc<rustls::ServerConfig>, AgentError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        let ca = ca.map_err(|e| cert_error("ca.crt", e))?;
        roots.add(ca).map_err(|e| cert_error("ca.crt", e))?;
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| cert_error("client verifier", e))?;
    let key = PrivateKeyDer::try_from(key.serialize_der()).map_err(|e| cert_error("key", e))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| cert_error("TLS", e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![cert], key)
        .map_err(|e| cert_error("TLS", e))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The server's URL for clients: `https://ADDR:PORT`, 127.0.0.1 for an
/// unspecified address.
fn server_url(addr: SocketAddr) -> String {
    let host = if addr.ip().is_unspecified() {
        "127.0.0.1".to_owned()
    } else {
        match addr {
            SocketAddr::V4(a) => a.ip().to_string(),
            SocketAddr::V6(a) => format!("[{}]", a.ip()),
        }
    };
    format!("https://{host}:{}", addr.port())
}

/// The line that names the server in a kubeconfig this module wrote.
const SERVER_LINE: &str = "    server: ";

/// The kubeconfig: one cluster, one user, one context (namespace
/// `default`), current.
fn kubeconfig_text(ca_pem: &str, server: &str, user: &str, cert: &str, key: &str) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    // JSON quoting is YAML quoting for these strings.
    let q = |s: &str| serde_json::Value::from(s).to_string();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: grace\n  cluster:\n{SERVER_LINE}{server}\n    certificate-authority-data: {ca}\nusers:\n- name: {u}\n  user:\n    client-certificate-data: {cert}\n    client-key-data: {key}\ncontexts:\n- name: grace\n  context:\n    cluster: grace\n    user: {u}\n    namespace: default\ncurrent-context: grace\n",
        ca = b64(ca_pem),
        u = q(user),
        cert = b64(cert),
        key = b64(key),
    )
}

/// Why [`user_kubeconfig`] made no kubeconfig.
#[derive(Debug)]
#[non_exhaustive]
pub enum KubeconfigError {
    /// The CA's key or certificate cannot be read: only the agent's owner
    /// can, once an agent ran with `--k8s-api` on this data directory.
    Ca {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The agent's kubeconfig, which names the server, cannot be read, or
    /// names none (give the server's URL instead).
    Server {
        /// The agent's kubeconfig.
        path: PathBuf,
    },
    /// The user's name is empty, or holds a control character.
    User,
    /// The certificate could not be made (a damaged CA key): the cause is
    /// the [`source`](std::error::Error::source).
    Certificate(Box<dyn std::error::Error + Send + Sync>),
}

impl std::fmt::Display for KubeconfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KubeconfigError::Ca { path, error } => write!(
                f,
                "{}: {error} (only the agent's owner can issue certificates, once the agent ran with --k8s-api)",
                path.display()
            ),
            KubeconfigError::Server { path } => write!(
                f,
                "{}: no server named (start the agent with --k8s-api, or give --server)",
                path.display()
            ),
            KubeconfigError::User => {
                f.write_str("the user name is empty or holds a control character")
            }
            KubeconfigError::Certificate(_) => f.write_str("the certificate could not be made"),
        }
    }
}

/// Only [`Certificate`](KubeconfigError::Certificate) has a source: the
/// others name their cause in the message.
impl std::error::Error for KubeconfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KubeconfigError::Certificate(e) => Some(&**e),
            KubeconfigError::Ca { .. } | KubeconfigError::Server { .. } | KubeconfigError::User => {
                None
            }
        }
    }
}

/// A kubeconfig for `user`, a member of `groups`, to reach the API of the
/// agent on `data_dir`: a new key and a certificate signed by the agent's
/// CA with CN = `user` and one O per group (the Kubernetes convention),
/// which the API gives the access the socket gives that user: the
/// agent's own user reads and writes, an O naming the `--allow-group`
/// group (as given to it) has that group's access, anyone else is
/// refused. The server is `server` (a URL), else the one the agent's own
/// kubeconfig names. Needs the CA's key: only the agent's owner can issue
/// one. Nothing is written: the key is in the text only.
pub fn user_kubeconfig(
    data_dir: &Path,
    user: &str,
    groups: &[&str],
    server: Option<&str>,
) -> Result<String, KubeconfigError> {
    if user.is_empty() || user.chars().any(char::is_control) {
        return Err(KubeconfigError::User);
    }
    let dir = data_dir.join(CERT_DIR);
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read_to_string(&path).map_err(|error| KubeconfigError::Ca { path, error })
    };
    let ca_key = read("ca.key")?;
    let ca_pem = read("ca.crt")?;
    let server = match server {
        Some(url) => url.to_owned(),
        None => {
            let path = data_dir.join(KUBECONFIG);
            std::fs::read_to_string(&path)
                .ok()
                .and_then(|text| {
                    let line = text.lines().find_map(|l| l.strip_prefix(SERVER_LINE))?;
                    Some(line.trim().to_owned())
                })
                .filter(|url| !url.is_empty())
                .ok_or(KubeconfigError::Server { path })?
        }
    };
    let failed = |e: rcgen::Error| KubeconfigError::Certificate(Box::new(e));
    let params = |e: AgentError| KubeconfigError::Certificate(Box::new(e));
    let ca_key = KeyPair::from_pem(&ca_key).map_err(failed)?;
    let issuer = Issuer::new(ca_params().map_err(params)?, ca_key);
    let key = KeyPair::generate().map_err(failed)?;
    let cert = user_params(user, groups)
        .map_err(params)?
        .signed_by(&key, &issuer)
        .map_err(failed)?;
    Ok(kubeconfig_text(
        &ca_pem,
        &server,
        user,
        &cert.pem(),
        &key.serialize_pem(),
    ))
}
