//! A plain HTTPS/1.1 client of the agent's Kubernetes API, with the TLS of
//! a kubeconfig (the agent's CA, a user's client certificate): one request
//! at a time on a keep-alive connection, and watches read event by event.
//! Shared by the tests and the `k8s_api` bench (which includes this file),
//! where kubectl or curl would be one process per connection.

use std::io::{BufRead, BufReader, Read, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// Where a kubeconfig points and the TLS it gives.
#[derive(Clone)]
pub struct Endpoint {
    /// The API's port on 127.0.0.1.
    pub port: u16,
    /// The CA and the client certificate.
    pub tls: Arc<rustls::ClientConfig>,
}

impl Endpoint {
    /// Reads `kubeconfig` (as the agent or `grace kubeconfig` writes it):
    /// `None` before it names a server.
    pub fn from_kubeconfig(kubeconfig: &Path) -> Option<Endpoint> {
        let text = std::fs::read_to_string(kubeconfig).ok()?;
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.trim().strip_prefix(name).map(str::to_owned))
        };
        let server = field("server: https://")?;
        let port = server.rsplit_once(':')?.1.trim().parse().ok()?;
        let pem = |name: &str| {
            base64::engine::general_purpose::STANDARD
                .decode(field(name)?.trim())
                .ok()
        };
        let ca = pem("certificate-authority-data: ")?;
        let cert = pem("client-certificate-data: ")?;
        let key = pem("client-key-data: ")?;
        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(&ca) {
            roots.add(ca.ok()?).ok()?;
        }
        let chain = CertificateDer::pem_slice_iter(&cert)
            .collect::<Result<Vec<_>, _>>()
            .ok()?;
        let key = PrivateKeyDer::from_pem_slice(&key).ok()?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .ok()?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .ok()?;
        Some(Endpoint {
            port,
            tls: Arc::new(tls),
        })
    }
}

/// A TLS connection to the API.
pub type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// One HTTPS keep-alive connection, one request at a time.
pub struct Https(pub BufReader<Tls>);

impl Https {
    /// Connects (the handshake ends with the first request).
    pub fn connect(endpoint: &Endpoint) -> Https {
        let tcp = TcpStream::connect(("127.0.0.1", endpoint.port)).expect("connects");
        tcp.set_nodelay(true).expect("nodelay");
        let name = ServerName::try_from("127.0.0.1").expect("a server name");
        let connection =
            rustls::ClientConnection::new(endpoint.tls.clone(), name).expect("TLS client");
        Https(BufReader::new(rustls::StreamOwned::new(connection, tcp)))
    }

    /// `METHOD PATH` with no body; the answer's status and body.
    pub fn request(&mut self, method: &str, path: &str) -> (u16, Vec<u8>) {
        let request = format!(
            "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: application/json\r\n\
             content-length: 0\r\n\r\n"
        );
        self.0
            .get_mut()
            .write_all(request.as_bytes())
            .expect("sent");
        let (status, chunked, length) = head(&mut self.0);
        let body = if chunked {
            let mut body = Vec::new();
            while let Some(chunk) = next_chunk(&mut self.0) {
                body.extend(chunk);
            }
            body
        } else {
            let mut body = vec![0; length];
            self.0.read_exact(&mut body).expect("the body");
            body
        };
        (status, body)
    }
}

/// The status line and headers of an answer: its status, whether it is
/// chunked, its content length.
fn head(reader: &mut impl BufRead) -> (u16, bool, usize) {
    let mut line = String::new();
    reader.read_line(&mut line).expect("a status line");
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {line:?}"));
    let (mut chunked, mut length) = (false, 0);
    loop {
        line.clear();
        reader.read_line(&mut line).expect("a header");
        let header = line.trim_end();
        if header.is_empty() {
            return (status, chunked, length);
        }
        let (key, value) = header.split_once(':').unwrap_or((header, ""));
        let value = value.trim();
        if key.eq_ignore_ascii_case("transfer-encoding") && value.eq_ignore_ascii_case("chunked") {
            chunked = true;
        } else if key.eq_ignore_ascii_case("content-length") {
            length = value.parse().expect("a length");
        }
    }
}

/// The next chunk of a chunked body; `None` at its end (or the stream's).
fn next_chunk(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let size = usize::from_str_radix(line.trim(), 16).ok()?;
    let mut chunk = vec![0; size + 2];
    reader.read_exact(&mut chunk).ok()?;
    chunk.truncate(size);
    (size > 0).then_some(chunk)
}

/// An HTTPS watch of the default namespace's pods.
pub struct Watch {
    reader: BufReader<Tls>,
    /// Bytes of an event not yet ended by its newline.
    pending: Vec<u8>,
}

impl Watch {
    /// Opens a watch and reads the `ADDED` of each of the `pods` stored;
    /// `Err` with the status when the server answers otherwise than with
    /// a stream (429 over the quota).
    pub fn open(endpoint: &Endpoint, pods: usize) -> Result<Watch, u16> {
        let mut https = Https::connect(endpoint);
        let request = "GET /api/v1/namespaces/default/pods?watch=true HTTP/1.1\r\n\
                       host: 127.0.0.1\r\naccept: application/json\r\n\r\n";
        https
            .0
            .get_mut()
            .write_all(request.as_bytes())
            .expect("sent");
        let (status, chunked, _) = head(&mut https.0);
        if status != 200 || !chunked {
            return Err(status);
        }
        let mut watch = Watch {
            reader: https.0,
            pending: Vec::new(),
        };
        let mut added = 0;
        while added < pods {
            let event = watch.next_event().expect("the ADDED events");
            added += usize::from(event.contains("\"ADDED\""));
        }
        Ok(watch)
    }

    /// The next event line; `None` when the stream ends.
    pub fn next_event(&mut self) -> Option<String> {
        loop {
            if let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                return Some(String::from_utf8_lossy(&line).into_owned());
            }
            let chunk = next_chunk(&mut self.reader)?;
            self.pending.extend(chunk);
        }
    }
}
