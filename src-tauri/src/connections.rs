//! Where the console connects: the embedded demo or a PostgreSQL server the operator names, and
//! the server connections it remembers between runs.
//!
//! A server connection is everything needed to reach the server and the person's own login role,
//! never a password: the console asks for the password at every sign-in, and the saved list
//! (`$XDG_CONFIG_HOME/mesh-memory/connections.json`, else `~/.config/mesh-memory/…`, mode 0600)
//! holds nothing an attacker could sign in with.

use std::path::{Path, PathBuf};

use mesh_memory::database;
use serde::{Deserialize, Serialize};
use specta::Type;
use sqlx::postgres::{PgConnectOptions, PgSslMode};

use crate::error::{ConsoleError, ErrorKind};

/// How the connection is protected, as libpq's `sslmode` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Type)]
#[serde(rename_all = "kebab-case")]
pub enum TlsMode {
    /// No TLS: only for a server on this machine or a trusted network.
    Disable,
    /// TLS when the server offers it, without checking its certificate.
    Prefer,
    /// TLS always, without checking the certificate (with a CA file: as `verify-ca`, as libpq).
    Require,
    /// TLS with a certificate signed by the CA, any host name.
    VerifyCa,
    /// TLS with a certificate signed by the CA for exactly this host name (the safe choice).
    VerifyFull,
}

impl TlsMode {
    fn ssl_mode(self) -> PgSslMode {
        match self {
            TlsMode::Disable => PgSslMode::Disable,
            TlsMode::Prefer => PgSslMode::Prefer,
            TlsMode::Require => PgSslMode::Require,
            TlsMode::VerifyCa => PgSslMode::VerifyCa,
            TlsMode::VerifyFull => PgSslMode::VerifyFull,
        }
    }
}

/// A PostgreSQL server and the login role to sign in with; no password.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Type)]
pub struct ServerConnection {
    /// Host name or address (for `verify-full`, the name the certificate is for).
    pub host: String,
    /// TCP port (PostgreSQL's default is 5432).
    pub port: u16,
    /// The Mesh Memory database on that server.
    pub database: String,
    /// How the connection is protected.
    pub tls: TlsMode,
    /// A PEM file of the CA that signed the server's certificate (`sslrootcert`); none: the
    /// system's trusted CAs.
    pub ca_file: Option<String>,
    /// The person's own PostgreSQL login role.
    pub role: String,
}

impl ServerConnection {
    /// Checks the fields and builds the options to reach the server, without credentials. Every
    /// refusal names the field and what to enter.
    pub fn connect_options(&self) -> Result<PgConnectOptions, ConsoleError> {
        let host = self.host.trim();
        if host.is_empty() || host.len() > 253 || host.chars().any(|c| c.is_whitespace() || c == '/') {
            return Err(invalid("enter the server's host name or address (no spaces or slashes)"));
        }
        if self.port == 0 {
            return Err(invalid("the port must be between 1 and 65535 (PostgreSQL's default is 5432)"));
        }
        let database_name = self.database.trim();
        if database_name.is_empty() || database_name.len() > 63 {
            return Err(invalid("enter the database name (1 to 63 characters)"));
        }
        let options = PgConnectOptions::new_without_pgpass()
            .host(host)
            .port(self.port)
            .database(database_name)
            .application_name("mesh-memory-console");
        database::with_tls(options, self.tls.ssl_mode(), self.ca_file.as_deref())
            .map_err(|err| ConsoleError::new(ErrorKind::Invalid, err.to_string()))
    }

    /// What the status bar shows: `role@host:port/database (TLS verify-full)`.
    pub fn label(&self) -> String {
        let tls = match self.tls {
            TlsMode::Disable => "no TLS".to_owned(),
            mode => format!("TLS {}", database::ssl_mode_name(mode.ssl_mode())),
        };
        format!("{}@{}:{}/{} ({tls})", self.role.trim(), self.host.trim(), self.port, self.database.trim())
    }

    /// The same server and database for the same role: one saved entry.
    fn same_place(&self, other: &ServerConnection) -> bool {
        self.host.trim() == other.host.trim()
            && self.port == other.port
            && self.database.trim() == other.database.trim()
            && self.role.trim() == other.role.trim()
    }
}

fn invalid(message: &str) -> ConsoleError {
    ConsoleError::new(ErrorKind::Invalid, message)
}

/// The server connections the console remembers, newest first.
#[derive(Debug)]
pub struct SavedConnections {
    file: Option<PathBuf>,
}

/// The most connections remembered.
const MAX_SAVED: usize = 20;

impl SavedConnections {
    /// The list in the user's configuration directory (none when neither `XDG_CONFIG_HOME` nor
    /// `HOME` is set: nothing is remembered then).
    pub fn in_user_config() -> Self {
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").filter(|d| !d.is_empty()).map(|h| PathBuf::from(h).join(".config")));
        Self { file: base.map(|dir| dir.join("mesh-memory").join("connections.json")) }
    }

    /// The list in `file` (tests).
    pub fn at(file: impl Into<PathBuf>) -> Self {
        Self { file: Some(file.into()) }
    }

    /// The remembered connections; an unreadable or damaged file reads as an empty list (it is
    /// rewritten by the next successful connection).
    pub fn list(&self) -> Vec<ServerConnection> {
        let Some(file) = &self.file else { return Vec::new() };
        let Ok(text) = std::fs::read_to_string(file) else { return Vec::new() };
        match serde_json::from_str::<Vec<ServerConnection>>(&text) {
            Ok(list) => list,
            Err(err) => {
                tracing::warn!("ignoring {}: {err}", file.display());
                Vec::new()
            }
        }
    }

    /// Puts `connection` first (replacing the entry for the same server, database and role).
    pub fn remember(&self, connection: &ServerConnection) -> std::io::Result<()> {
        let mut list = self.list();
        list.retain(|c| !c.same_place(connection));
        list.insert(0, connection.clone());
        list.truncate(MAX_SAVED);
        self.write(&list)
    }

    /// Removes the entry for the same server, database and role.
    pub fn forget(&self, connection: &ServerConnection) -> std::io::Result<()> {
        let mut list = self.list();
        list.retain(|c| !c.same_place(connection));
        self.write(&list)
    }

    /// Writes the whole list to a temporary file (0600) and renames it over the old one, so a
    /// crash leaves either list, never half of one.
    fn write(&self, list: &[ServerConnection]) -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let Some(file) = &self.file else { return Ok(()) };
        let dir = file.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let temporary = dir.join(format!(".connections.{}.tmp", std::process::id()));
        let mut out =
            std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&temporary)?;
        out.write_all(serde_json::to_string_pretty(list).map_err(std::io::Error::other)?.as_bytes())?;
        out.sync_all()?;
        std::fs::rename(&temporary, file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(role: &str) -> ServerConnection {
        ServerConnection {
            host: "db.internal".into(),
            port: 5432,
            database: "mesh".into(),
            tls: TlsMode::VerifyFull,
            ca_file: None,
            role: role.into(),
        }
    }

    #[test]
    fn remembered_connections_hold_no_password_and_replace_the_same_place() {
        let dir = std::env::temp_dir().join(format!("mesh-connections-{}", uuid::Uuid::new_v4()));
        let saved = SavedConnections::at(dir.join("connections.json"));
        saved.remember(&server("alice")).unwrap();
        saved.remember(&server("bob")).unwrap();
        saved.remember(&server("alice")).unwrap();
        let list = saved.list();
        assert_eq!(list.iter().map(|c| c.role.as_str()).collect::<Vec<_>>(), ["alice", "bob"]);
        let text = std::fs::read_to_string(dir.join("connections.json")).unwrap();
        assert!(!text.to_lowercase().contains("password"), "{text}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("connections.json")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        saved.forget(&server("alice")).unwrap();
        assert_eq!(saved.list().len(), 1);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_damaged_file_reads_as_no_connections() {
        let dir = std::env::temp_dir().join(format!("mesh-connections-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("connections.json"), "{not json").unwrap();
        assert!(SavedConnections::at(dir.join("connections.json")).list().is_empty());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn bad_fields_are_refused_with_the_field_named() {
        let mut bad = server("alice");
        bad.host = " ".into();
        assert!(bad.connect_options().unwrap_err().message.contains("host"));
        let mut bad = server("alice");
        bad.port = 0;
        assert!(bad.connect_options().unwrap_err().message.contains("port"));
        let mut bad = server("alice");
        bad.ca_file = Some("/nonexistent/ca.pem".into());
        assert!(bad.connect_options().unwrap_err().message.contains("/nonexistent/ca.pem"));
    }

    #[test]
    fn require_with_a_ca_file_checks_the_certificate_as_libpq_does() {
        let dir = std::env::temp_dir().join(format!("mesh-ca-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ca.pem"), "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n").unwrap();
        let mut with_ca = server("alice");
        with_ca.tls = TlsMode::Require;
        with_ca.ca_file = Some(dir.join("ca.pem").display().to_string());
        assert!(matches!(with_ca.connect_options().unwrap().get_ssl_mode(), PgSslMode::VerifyCa));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
