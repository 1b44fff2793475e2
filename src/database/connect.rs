//! Reaching a PostgreSQL server: the URL's TLS settings read as libpq reads them, and every way a
//! connection can fail named in words a person can act on (the console shows them on its
//! connection screen, the CLI prints them).
//!
//! TLS is rustls (sqlx's `tls-rustls-ring-native-roots`): `sslmode` `disable | prefer | require |
//! verify-ca | verify-full` and `sslrootcert` (a PEM file of trusted CAs; without it, the system's
//! trusted CAs). As in libpq, `require` with an `sslrootcert` verifies the chain (`verify-ca`).

use std::path::PathBuf;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgSslMode};
use sqlx::ConnectOptions;

/// How long a server gets to accept a TCP connection before it counts as not answering.
const REACH_TIMEOUT: Duration = Duration::from_secs(10);

/// The `sslmode` values this build honours, as libpq spells them.
pub const SSL_MODES: [&str; 5] = ["disable", "prefer", "require", "verify-ca", "verify-full"];

/// Why a connection to PostgreSQL could not be made, in words that name the cause. No variant
/// carries a password: the URL's password is never copied into an error.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The URL cannot be read (no password in the reason: it is the parser's, not the URL).
    #[error("invalid database URL: {reason}")]
    InvalidUrl {
        /// What is wrong with it.
        reason: String,
    },
    /// `sslmode` names no mode this build knows.
    #[error("sslmode={value} is not a TLS mode: use disable, prefer, require, verify-ca or verify-full")]
    InvalidSslMode {
        /// The value given.
        value: String,
    },
    /// `sslrootcert` names a file that cannot be read, or holds no PEM certificate.
    #[error("cannot read the CA file {path}: {reason}")]
    CaFileUnreadable {
        /// The file named by `sslrootcert`.
        path: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// Nothing accepts connections at the address (refused, no such socket, no such host, no
    /// answer in time).
    #[error("no PostgreSQL server answers at {address} ({cause})")]
    NoServer {
        /// `host:port`, or the unix socket's path.
        address: String,
        /// The system's reason.
        cause: String,
    },
    /// The server accepts only TLS connections and this one was made without (`sslmode=disable`).
    #[error("the server requires TLS (connect with sslmode=require or stricter)")]
    TlsRequired,
    /// The server answered the TLS request with "no" and the mode does not allow plaintext.
    #[error("the server does not offer TLS but sslmode={mode} asks for it")]
    TlsNotOffered {
        /// The mode asked for.
        mode: String,
    },
    /// The server's certificate does not chain to a trusted CA.
    #[error("certificate not trusted (CA {ca})")]
    CertificateNotTrusted {
        /// The CA file trusted (`sslrootcert`), or "the system's trusted CAs".
        ca: String,
    },
    /// The certificate is trusted but issued for other names than the host connected to
    /// (`verify-full`).
    #[error("host name {host} does not match the certificate{presented}")]
    HostNameMismatch {
        /// The host name (or address) connected to.
        host: String,
        /// ` (it is for …)`, the names the certificate holds, when rustls says.
        presented: String,
    },
    /// The certificate was refused for another reason (expired, not yet valid, revoked, bad
    /// signature...).
    #[error("the server's certificate was refused: {reason}")]
    CertificateRefused {
        /// rustls's reason.
        reason: String,
    },
    /// The server refused the password (or the role does not exist: PostgreSQL does not say
    /// which, on purpose).
    #[error("password authentication failed for role {role}")]
    PasswordFailed {
        /// The role that tried to sign in.
        role: String,
    },
    /// The server has no database of that name.
    #[error("database {database} does not exist")]
    NoDatabase {
        /// The database asked for.
        database: String,
    },
    /// The database is reachable but Mesh Memory's schema was never applied to it.
    #[error("this database has no Mesh Memory schema (run `mesh-memory db migrate` as its owner)")]
    NoSchema,
    /// Anything else, with the driver's (or server's) own words.
    #[error("cannot connect to PostgreSQL: {0}")]
    Other(sqlx::Error),
}

/// Reads a PostgreSQL URL into connect options, with libpq's TLS semantics: a bad `sslmode` is a
/// [`ConnectError::InvalidSslMode`], `sslmode=require` with an `sslrootcert` verifies the chain
/// like `verify-ca`, a unix socket is never asked for TLS (as libpq), and a CA file that cannot be
/// read is reported before any connection is tried.
pub fn connect_options(url: &str) -> Result<PgConnectOptions, ConnectError> {
    let ssl_mode = query_parameter(url, &["sslmode", "ssl-mode"]);
    if let Some(value) = &ssl_mode {
        if !SSL_MODES.contains(&value.to_ascii_lowercase().as_str()) {
            return Err(ConnectError::InvalidSslMode { value: value.clone() });
        }
    }
    let options: PgConnectOptions =
        url.parse().map_err(|e: sqlx::Error| ConnectError::InvalidUrl { reason: configuration_reason(&e) })?;
    let root_cert = query_parameter(url, &["sslrootcert", "ssl-root-cert", "ssl-ca"])
        .or_else(|| std::env::var("PGSSLROOTCERT").ok())
        .filter(|value| !value.trim().is_empty());
    libpq_tls_rules(options, root_cert.as_deref())
}

/// Options for a server given field by field (the console's connection form): `mode` and the CA
/// file `root_cert` (none or blank: the system's trusted CAs) under the same libpq rules as
/// [`connect_options`] gives a URL.
pub fn with_tls(
    options: PgConnectOptions,
    mode: PgSslMode,
    root_cert: Option<&str>,
) -> Result<PgConnectOptions, ConnectError> {
    let root_cert = root_cert.map(str::trim).filter(|value| !value.is_empty());
    let options = match root_cert {
        Some(ca) => options.ssl_mode(mode).ssl_root_cert(ca),
        None => options.ssl_mode(mode),
    };
    libpq_tls_rules(options, root_cert)
}

/// libpq's TLS rules, once for URLs and forms: no TLS on a unix socket, `require` with a CA file
/// verifies the chain like `verify-ca`, and a CA file that cannot be read is reported before any
/// connection is tried.
fn libpq_tls_rules(options: PgConnectOptions, root_cert: Option<&str>) -> Result<PgConnectOptions, ConnectError> {
    let options = match (options.get_socket(), options.get_ssl_mode(), root_cert) {
        // libpq never asks for TLS on a unix socket (PostgreSQL offers none there).
        (Some(_), _, _) => options.ssl_mode(PgSslMode::Disable),
        (None, PgSslMode::Require, Some(_)) => options.ssl_mode(PgSslMode::VerifyCa),
        _ => options,
    };
    if let (Some(path), true) = (ca_file(root_cert), !matches!(options.get_ssl_mode(), PgSslMode::Disable)) {
        check_ca_file(&path)?;
    }
    Ok(options)
}

/// The reason of a URL parse error without sqlx's "error with configuration:" prefix.
fn configuration_reason(err: &sqlx::Error) -> String {
    match err {
        sqlx::Error::Configuration(inner) => inner.to_string(),
        other => other.to_string(),
    }
}

/// The last value of the first of `names` present in `url`'s query string, percent-decoded (as
/// sqlx reads it: a later pair overrides an earlier one).
fn query_parameter(url: &str, names: &[&str]) -> Option<String> {
    let query = url.split_once('?')?.1;
    let query = query.split_once('#').map_or(query, |(q, _)| q);
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .filter(|(key, _)| names.contains(&percent_decode(key).as_str()))
        .map(|(_, value)| percent_decode(value))
        .next_back()
}

/// Form-URL decoding of one query component (`+` is a space, `%XY` a byte).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex_digit(bytes[i + 1]), hex_digit(bytes[i + 2])) {
                (Some(high), Some(low)) => {
                    out.push(high << 4 | low);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            other => out.push(other),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The value of one hexadecimal digit.
fn hex_digit(byte: u8) -> Option<u8> {
    (byte as char).to_digit(16).map(|d| d as u8)
}

/// The CA file an `sslrootcert` value names (`None` for inline PEM, as sqlx reads it).
fn ca_file(root_cert: Option<&str>) -> Option<PathBuf> {
    let value = root_cert?.trim();
    (!(value.starts_with("-----BEGIN") && value.ends_with("-----"))).then(|| PathBuf::from(value))
}

/// Fails unless `path` can be read and holds at least one PEM certificate.
fn check_ca_file(path: &std::path::Path) -> Result<(), ConnectError> {
    let unreadable = |reason: String| ConnectError::CaFileUnreadable { path: path.display().to_string(), reason };
    let text = std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => unreadable("no such file".to_owned()),
        _ => unreadable(io_cause(&e)),
    })?;
    if !String::from_utf8_lossy(&text).contains("-----BEGIN CERTIFICATE-----") {
        return Err(unreadable("it holds no PEM certificate (-----BEGIN CERTIFICATE-----)".to_owned()));
    }
    Ok(())
}

/// Where `options` connects, as a person would name it: `host:port` or the unix socket's path.
pub fn server_address(options: &PgConnectOptions) -> String {
    match options.get_socket() {
        Some(dir) if dir.is_dir() || !dir.exists() => {
            format!("{}/.s.PGSQL.{}", dir.display(), options.get_port())
        }
        Some(socket) => socket.display().to_string(),
        None => format!("{}:{}", options.get_host(), options.get_port()),
    }
}

/// Checks that something accepts connections at `options`' address (TCP or unix socket), so a
/// wrong port fails at once instead of after the pool's acquire timeout (the pool retries a
/// refused connection, taking it for a server still starting). Nothing is sent.
pub(crate) async fn reach_server(options: &PgConnectOptions) -> Result<(), ConnectError> {
    reach(options).await.map_err(|e| ConnectError::NoServer { address: server_address(options), cause: io_cause(&e) })
}

/// [`reach_server`]'s check as an I/O result (a timeout is `TimedOut`), for callers whose errors
/// carry a `sqlx::Error` ([`explain_connect_error`] names it the same way).
pub(crate) async fn reach(options: &PgConnectOptions) -> std::io::Result<()> {
    let attempt = async {
        match options.get_socket() {
            Some(_) => tokio::net::UnixStream::connect(server_address(options)).await.map(drop),
            None => tokio::net::TcpStream::connect((options.get_host(), options.get_port())).await.map(drop),
        }
    };
    tokio::time::timeout(REACH_TIMEOUT, attempt).await.unwrap_or_else(|_| {
        Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer within {} s", REACH_TIMEOUT.as_secs()),
        ))
    })
}

/// An I/O error's reason in lower case, without the OS error number.
fn io_cause(err: &std::io::Error) -> String {
    match err.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
        std::io::ErrorKind::NotFound => "no such socket".to_owned(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        _ => {
            let text = err.to_string();
            text.split(" (os error").next().unwrap_or(&text).to_owned()
        }
    }
}

/// Names the cause of a failed connection made with `options`: TLS refused or not offered, an
/// untrusted or misnamed certificate, a refused password, a missing database or server. Reads the
/// error chain (the rustls error inside an I/O error, the server's SQLSTATE), never the password.
pub fn explain_connect_error(err: sqlx::Error, options: &PgConnectOptions) -> ConnectError {
    if let Some(tls) = rustls_error(&err) {
        return explain_tls_error(tls, options);
    }
    match &err {
        sqlx::Error::Tls(inner) if inner.to_string().contains("server does not support TLS") => {
            return ConnectError::TlsNotOffered { mode: ssl_mode_name(options.get_ssl_mode()).to_owned() };
        }
        sqlx::Error::Tls(inner) if inner.to_string().starts_with("Invalid certificate") => {
            return ConnectError::CaFileUnreadable {
                path: root_cert_description(options).unwrap_or_default(),
                reason: "it is not a PEM certificate".to_owned(),
            };
        }
        sqlx::Error::Database(db) => {
            if let Some(explained) = explain_server_refusal(db.code().as_deref(), db.message(), options) {
                return explained;
            }
        }
        sqlx::Error::Io(io) => return explain_io_error(io, options),
        sqlx::Error::PoolTimedOut => {
            return ConnectError::NoServer {
                address: server_address(options),
                cause: "no connection could be made before the timeout".to_owned(),
            };
        }
        _ => {}
    }
    ConnectError::Other(err)
}

/// A refusal the server sent during startup (SQLSTATE and message), in words.
fn explain_server_refusal(code: Option<&str>, message: &str, options: &PgConnectOptions) -> Option<ConnectError> {
    match code? {
        "28P01" => Some(ConnectError::PasswordFailed { role: options.get_username().to_owned() }),
        // pg_hba.conf has only `hostssl` lines for this client: PostgreSQL says "no encryption"
        // (before 14: "SSL off").
        "28000" if message.contains("no encryption") || message.contains("SSL off") => Some(ConnectError::TlsRequired),
        "3D000" => Some(ConnectError::NoDatabase {
            database: options.get_database().unwrap_or(options.get_username()).to_owned(),
        }),
        _ => None,
    }
}

/// An I/O failure while connecting: the CA file (sqlx reads it during the handshake) or the
/// server's address.
fn explain_io_error(io: &std::io::Error, options: &PgConnectOptions) -> ConnectError {
    let reads_ca = !matches!(options.get_ssl_mode(), PgSslMode::Disable);
    if let (true, Some(path)) = (reads_ca, ca_file(root_cert_description(options).as_deref())) {
        if let Err(unreadable) = check_ca_file(&path) {
            return unreadable;
        }
    }
    ConnectError::NoServer { address: server_address(options), cause: io_cause(io) }
}

/// A certificate or handshake failure, in words.
fn explain_tls_error(err: &rustls::Error, options: &PgConnectOptions) -> ConnectError {
    use rustls::CertificateError as Cert;
    match err {
        rustls::Error::InvalidCertificate(Cert::UnknownIssuer | Cert::BadSignature) => {
            ConnectError::CertificateNotTrusted { ca: trusted_cas(options) }
        }
        rustls::Error::InvalidCertificate(Cert::NotValidForName) => {
            ConnectError::HostNameMismatch { host: options.get_host().to_owned(), presented: String::new() }
        }
        rustls::Error::InvalidCertificate(Cert::NotValidForNameContext { presented, .. }) => {
            ConnectError::HostNameMismatch {
                host: options.get_host().to_owned(),
                presented: if presented.is_empty() {
                    String::new()
                } else {
                    let names: Vec<&str> = presented.iter().map(|name| presented_name(name)).collect();
                    format!(" (it is for {})", names.join(", "))
                },
            }
        }
        other => ConnectError::CertificateRefused { reason: other.to_string() },
    }
}

/// A name rustls reports a certificate holds, without its debug wrapping (`DnsName("localhost")`
/// is `localhost`).
fn presented_name(name: &str) -> &str {
    name.strip_prefix("DnsName(\"").and_then(|rest| rest.strip_suffix("\")")).unwrap_or(name)
}

/// The rustls error somewhere in `err`'s chain: sqlx wraps a failed handshake in an I/O error
/// (whose `source()` skips the error it carries, so `get_ref` is read as well).
fn rustls_error(err: &sqlx::Error) -> Option<&rustls::Error> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(current) = next {
        if let Some(tls) = current.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        if let Some(tls) = current
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return Some(tls);
        }
        next = current.source();
    }
    None
}

/// The CAs a verifying connection trusted: the `sslrootcert` file, or the system's.
fn trusted_cas(options: &PgConnectOptions) -> String {
    root_cert_description(options).unwrap_or_else(|| "the system's trusted CAs".to_owned())
}

/// The `sslrootcert` of `options`: its file path, or "an inline PEM certificate". sqlx keeps the
/// value private, so it is read back from the options' own URL form (whose password is never
/// looked at).
fn root_cert_description(options: &PgConnectOptions) -> Option<String> {
    let url = options.to_url_lossy();
    let value = url.query_pairs().find(|(key, _)| key == "sslrootcert").map(|(_, value)| value.into_owned())?;
    Some(match value.strip_prefix("file: ") {
        Some(path) => path.to_owned(),
        None => "an inline PEM certificate".to_owned(),
    })
}

/// `mode` as a URL names it.
pub fn ssl_mode_name(mode: PgSslMode) -> &'static str {
    match mode {
        PgSslMode::Disable => "disable",
        PgSslMode::Allow => "allow",
        PgSslMode::Prefer => "prefer",
        PgSslMode::Require => "require",
        PgSslMode::VerifyCa => "verify-ca",
        PgSslMode::VerifyFull => "verify-full",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_sslmode_is_named() {
        let err = connect_options("postgres://u:secret@db.example/x?sslmode=verify").unwrap_err();
        assert!(matches!(&err, ConnectError::InvalidSslMode { value } if value == "verify"), "{err}");
        assert!(!err.to_string().contains("secret"));
    }

    #[test]
    fn require_with_a_ca_verifies_the_chain_like_libpq() {
        let dir = std::env::temp_dir().join(format!("mm-ca-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n").unwrap();
        let url = format!("postgres://u@db.example/x?sslmode=require&sslrootcert={}", ca.display());
        assert!(matches!(connect_options(&url).unwrap().get_ssl_mode(), PgSslMode::VerifyCa));
        let plain = connect_options("postgres://u@db.example/x?sslmode=require").unwrap();
        assert!(matches!(plain.get_ssl_mode(), PgSslMode::Require));
        let socket = connect_options("postgres://u@localhost/x?host=/run/postgresql").unwrap();
        assert!(matches!(socket.get_ssl_mode(), PgSslMode::Disable));
        // A form (the console's) follows the same rules: a CA upgrades `require`, a blank one is none.
        let form = || PgConnectOptions::new_without_pgpass().host("db.example").port(5432);
        let with_ca = with_tls(form(), PgSslMode::Require, Some(ca.to_str().unwrap())).unwrap();
        assert!(matches!(with_ca.get_ssl_mode(), PgSslMode::VerifyCa));
        assert!(matches!(with_tls(form(), PgSslMode::Require, Some("  ")).unwrap().get_ssl_mode(), PgSslMode::Require));
        let missing = with_tls(form(), PgSslMode::VerifyFull, Some("/nonexistent/ca.pem")).unwrap_err();
        assert!(missing.to_string().starts_with("cannot read the CA file /nonexistent/ca.pem: "), "{missing}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_ca_file_is_reported_before_connecting() {
        let err = connect_options("postgres://u@db.example/x?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem")
            .unwrap_err();
        assert!(err.to_string().starts_with("cannot read the CA file /nonexistent/ca.pem: "), "{err}");
    }

    #[test]
    fn query_parameters_are_percent_decoded_and_the_last_wins() {
        let url = "postgres://h/d?sslrootcert=%2Ftmp%2Fa+b.pem&sslmode=disable&sslmode=verify-full";
        assert_eq!(query_parameter(url, &["sslrootcert"]).as_deref(), Some("/tmp/a b.pem"));
        assert_eq!(query_parameter(url, &["sslmode"]).as_deref(), Some("verify-full"));
        assert_eq!(query_parameter("postgres://h/d", &["sslmode"]), None);
        assert_eq!(percent_decode("100%"), "100%");
    }
}
