//! A test tool, never shipped: a PostgreSQL server that requires TLS, made of the embedded
//! PostgreSQL (whose build has no SSL, but has pgvector, which the schema needs) and this proxy
//! in front of it. It listens on 127.0.0.1, answers PostgreSQL's `SSLRequest` with `S`, accepts
//! TLS with the given certificate and key, and pipes the decrypted protocol to the cluster's unix
//! socket, so the client authenticates to the real server (SCRAM) through the tunnel.
//!
//! A client that starts without TLS is answered as a PostgreSQL whose `pg_hba.conf` has only
//! `hostssl` lines answers it: `FATAL 28000 no pg_hba.conf entry for host "127.0.0.1", user "…",
//! database "…", no encryption`. With `--no-tls` it plays a server without TLS instead: `N` to
//! `SSLRequest`, then the plaintext protocol passed through.
//!
//! ```text
//! pg_tls_proxy --upstream DIR/.s.PGSQL.5432 --cert server.pem --key server.key [--listen 127.0.0.1:0]
//! pg_tls_proxy --upstream DIR/.s.PGSQL.5432 --no-tls
//! ```
//! The first line on stdout is `listening on 127.0.0.1:PORT` (port 0 picks a free one).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// The request code of PostgreSQL's `SSLRequest` (1234.5679).
const SSL_REQUEST: u32 = 80_877_103;
/// The request code of `GSSENCRequest` (1234.5680): always refused, as by a server without GSSAPI.
const GSSENC_REQUEST: u32 = 80_877_104;
/// The request code of `CancelRequest` (1234.5678): passed to the server as is.
const CANCEL_REQUEST: u32 = 80_877_102;
/// The longest startup packet PostgreSQL accepts (`MAX_STARTUP_PACKET_LENGTH`).
const MAX_STARTUP_PACKET: usize = 10_000;

/// What the proxy plays.
#[derive(Clone)]
enum Mode {
    /// A server with only `hostssl` lines: TLS or nothing.
    TlsOnly(TlsAcceptor),
    /// A server without TLS.
    Plain,
}

struct Options {
    listen: String,
    upstream: PathBuf,
    mode: Mode,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let options = parse_arguments(std::env::args().skip(1).collect())?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(serve(options))
}

/// The command line, or a usage error.
fn parse_arguments(arguments: Vec<String>) -> Result<Options, Box<dyn std::error::Error>> {
    let mut listen = "127.0.0.1:0".to_owned();
    let (mut upstream, mut cert, mut key, mut plain) = (None, None, None, false);
    let mut arguments = arguments.into_iter();
    while let Some(argument) = arguments.next() {
        let mut value = || arguments.next().ok_or_else(|| format!("{argument} needs a value"));
        match argument.as_str() {
            "--listen" => listen = value()?,
            "--upstream" => upstream = Some(PathBuf::from(value()?)),
            "--cert" => cert = Some(PathBuf::from(value()?)),
            "--key" => key = Some(PathBuf::from(value()?)),
            "--no-tls" => plain = true,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let upstream = upstream.ok_or("--upstream SOCKET is required (the cluster's .s.PGSQL.<port> file)")?;
    let mode = match (plain, cert, key) {
        (true, None, None) => Mode::Plain,
        (false, Some(cert), Some(key)) => Mode::TlsOnly(acceptor(&cert, &key)?),
        _ => return Err("give --cert and --key, or --no-tls".into()),
    };
    Ok(Options { listen, upstream, mode })
}

/// A TLS acceptor for the PEM certificate chain and key (ring, TLS 1.2 and 1.3).
fn acceptor(cert: &std::path::Path, key: &std::path::Path) -> Result<TlsAcceptor, Box<dyn std::error::Error>> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{}: {e}", key.display()))?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Accepts connections until killed; each is served on its own task.
async fn serve(options: Options) -> Result<(), Box<dyn std::error::Error>> {
    let listener = TcpListener::bind(&options.listen).await?;
    println!("listening on {}", listener.local_addr()?);
    std::io::stdout().flush()?;
    let upstream = Arc::new(options.upstream);
    loop {
        let (client, peer) = listener.accept().await?;
        let (mode, upstream) = (options.mode.clone(), upstream.clone());
        tokio::spawn(async move {
            if let Err(err) = serve_client(client, &mode, &upstream).await {
                eprintln!("pg_tls_proxy: {peer}: {err}");
            }
        });
    }
}

/// One client: the startup negotiation, then the protocol piped to the server.
async fn serve_client(mut client: TcpStream, mode: &Mode, upstream: &std::path::Path) -> std::io::Result<()> {
    loop {
        let mut header = [0u8; 8];
        if client.read_exact(&mut header).await.is_err() {
            return Ok(()); // closed before a request (a reachability check)
        }
        let length = u32::from_be_bytes(header[..4].try_into().expect("4 bytes")) as usize;
        let code = u32::from_be_bytes(header[4..].try_into().expect("4 bytes"));
        if !(8..=MAX_STARTUP_PACKET).contains(&length) {
            return Err(std::io::Error::other(format!("invalid startup packet length {length}")));
        }
        match (code, mode) {
            (SSL_REQUEST, Mode::TlsOnly(acceptor)) => {
                client.write_all(b"S").await?;
                let mut tls = acceptor.accept(client).await?;
                let mut server = UnixStream::connect(upstream).await?;
                tokio::io::copy_bidirectional(&mut tls, &mut server).await?;
                return Ok(());
            }
            (SSL_REQUEST, Mode::Plain) | (GSSENC_REQUEST, _) => client.write_all(b"N").await?,
            (CANCEL_REQUEST, _) | (_, Mode::Plain) => {
                let mut packet = header.to_vec();
                packet.resize(length, 0);
                client.read_exact(&mut packet[8..]).await?;
                let mut server = UnixStream::connect(upstream).await?;
                server.write_all(&packet).await?;
                tokio::io::copy_bidirectional(&mut client, &mut server).await?;
                return Ok(());
            }
            (_, Mode::TlsOnly(_)) => {
                let mut body = vec![0u8; length - 8];
                client.read_exact(&mut body).await?;
                let parameter = |name: &str| startup_parameter(&body, name).unwrap_or_default();
                let user = parameter("user");
                let database = Some(parameter("database")).filter(|d| !d.is_empty()).unwrap_or_else(|| user.clone());
                client.write_all(&no_hba_entry_without_encryption(&user, &database)).await?;
                client.shutdown().await.ok();
                return Ok(());
            }
        }
    }
}

/// A startup message's parameter (`user`, `database`): NUL-terminated name and value pairs.
fn startup_parameter(body: &[u8], name: &str) -> Option<String> {
    let fields: Vec<&[u8]> = body.split(|b| *b == 0).collect();
    fields
        .chunks(2)
        .find(|pair| pair[0] == name.as_bytes())
        .and_then(|pair| pair.get(1))
        .map(|value| String::from_utf8_lossy(value).into_owned())
}

/// The `ErrorResponse` PostgreSQL sends a plaintext client when `pg_hba.conf` has only `hostssl`
/// lines for it (SQLSTATE 28000, invalid_authorization_specification; PostgreSQL 14 and later
/// say "no encryption").
fn no_hba_entry_without_encryption(user: &str, database: &str) -> Vec<u8> {
    let message =
        format!("no pg_hba.conf entry for host \"127.0.0.1\", user \"{user}\", database \"{database}\", no encryption");
    let mut fields = Vec::new();
    for (kind, value) in [(b'S', "FATAL"), (b'V', "FATAL"), (b'C', "28000"), (b'M', message.as_str())] {
        fields.push(kind);
        fields.extend_from_slice(value.as_bytes());
        fields.push(0);
    }
    fields.push(0);
    let mut packet = vec![b'E'];
    packet.extend_from_slice(&(fields.len() as u32 + 4).to_be_bytes());
    packet.extend_from_slice(&fields);
    packet
}
