//! The console's connection to a PostgreSQL server, end to end below the window: a server that
//! requires TLS (`scripts/tls-test-server.sh`: the embedded PostgreSQL behind a TLS proxy, with a
//! CA made for the test), reached as an auditor's own login role through `Console`, the state
//! every IPC command goes through. Checks the certificate, the schema handshake both ways (an
//! older database gives a read-only session the server enforces, a newer one is refused), the
//! wrong password, and that the saved connection holds no password.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use mesh_memory_console::connections::{SavedConnections, ServerConnection, TlsMode};
use mesh_memory_console::error::ErrorKind;
use mesh_memory_console::state::Console;
use sqlx::{Connection, PgConnection};

/// The TLS test server, stopped when the test ends (also when it fails).
struct TlsServer {
    dir: PathBuf,
    env: HashMap<String, String>,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/tls-test-server.sh")
}

impl TlsServer {
    fn start() -> Self {
        let dir = std::env::temp_dir().join(format!("console-tls-{}", std::process::id()));
        let output = Command::new(script()).arg("start").arg(&dir).env_remove("DATABASE_URL").output().expect("run");
        assert!(
            output.status.success(),
            "scripts/tls-test-server.sh could not start a TLS server (it needs the built mesh-memory and \
             examples/pg_tls_proxy: `cargo build --all-targets` at the root):\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let env = String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| line.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.trim_matches('\'').to_owned()))
            .collect();
        Self { dir, env }
    }

    fn get(&self, key: &str) -> &str {
        self.env.get(key).unwrap_or_else(|| panic!("tls-test-server.sh printed no {key}"))
    }

    /// The auditor's connection, with `ca` as the CA file.
    fn auditor(&self, ca: &str) -> ServerConnection {
        ServerConnection {
            host: self.get("MESH_TLS_HOST").to_owned(),
            port: self.get("MESH_TLS_PORT").parse().unwrap(),
            database: self.get("MESH_TLS_DATABASE").to_owned(),
            tls: TlsMode::VerifyFull,
            ca_file: Some(self.get(ca).to_owned()),
            role: self.get("MESH_TLS_AUDITOR").to_owned(),
        }
    }

    /// A connection as the cluster's superuser, through the same TLS proxy.
    async fn admin(&self) -> PgConnection {
        PgConnection::connect(self.get("MESH_TLS_ADMIN_URL")).await.expect("admin connection over TLS")
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").arg(&self.dir).output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn newest_migration(admin: &mut PgConnection) -> i64 {
    sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations").fetch_one(admin).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auditor_connects_over_verified_tls_and_the_schema_decides_what_it_may_do() {
    let server = TlsServer::start();
    let config = server.dir.join("config/connections.json");
    let console = Console::start(None, SavedConnections::at(&config)).await;
    let password = server.get("MESH_TLS_AUDITOR_PASSWORD").to_owned();
    assert!(!console.status().await.connected, "without DATABASE_URL the console starts unconnected");

    // A CA that did not sign the server's certificate: refused, in words, and nothing saved.
    let refused = console.connect_server(server.auditor("MESH_TLS_WRONG_CA"), &password, true).await.unwrap_err();
    assert_eq!(refused.kind, ErrorKind::Database);
    assert!(refused.message.contains("certificate not trusted"), "{}", refused.message);
    assert!(console.saved_connections().is_empty());

    // A wrong password names the role and sends the operator back to the form.
    let wrong = console.connect_server(server.auditor("MESH_TLS_CA"), "not-the-password", true).await.unwrap_err();
    assert_eq!(wrong.kind, ErrorKind::NotSignedIn);
    assert!(wrong.message.contains("password authentication failed"), "{}", wrong.message);
    assert!(!wrong.message.contains("not-the-password"));

    // A login role in none of the product's groups is told which role to ask for.
    let mut admin = server.admin().await;
    sqlx::query("CREATE ROLE tls_nobody LOGIN PASSWORD 'nobody-password-1'").execute(&mut admin).await.unwrap();
    let nobody = ServerConnection { role: "tls_nobody".into(), ..server.auditor("MESH_TLS_CA") };
    let refused = console.connect_server(nobody, "nobody-password-1", true).await.unwrap_err();
    assert_eq!(refused.kind, ErrorKind::Forbidden);
    assert!(refused.message.contains("GRANT mesh_console_reader TO tls_nobody"), "{}", refused.message);
    assert!(!console.status().await.connected && console.saved_connections().is_empty());

    // The right CA: signed in as the auditor, who may read and nothing else.
    let rights = console.connect_server(server.auditor("MESH_TLS_CA"), &password, true).await.expect("connect");
    assert_eq!(rights.role, server.get("MESH_TLS_AUDITOR"));
    assert!(rights.can_browse && !rights.can_approve && !rights.can_erase && !rights.can_revoke_tokens);
    let status = console.status().await;
    assert!(status.connected && !status.embedded && !status.scripted && !status.needs_first_operator);
    assert!(status.database_label.contains("TLS verify-full"), "{}", status.database_label);
    assert_eq!(status.schema_notice, None);
    let store = console.store().await.unwrap();
    assert!(!store.list_runtime_agents().await.unwrap().is_empty(), "the demo workspace is readable");
    // Remembered without the password.
    assert_eq!(console.saved_connections(), vec![server.auditor("MESH_TLS_CA")]);
    let saved = std::fs::read_to_string(&config).unwrap();
    assert!(!saved.contains(&password) && !saved.to_lowercase().contains("password"), "{saved}");

    // An older database (its newest migration not applied): a read-only session the server
    // enforces, with the words the banner shows.
    let newest = newest_migration(&mut admin).await;
    let row: (String, Vec<u8>, i64) =
        sqlx::query_as("SELECT description, checksum, execution_time FROM _sqlx_migrations WHERE version = $1")
            .bind(newest)
            .fetch_one(&mut admin)
            .await
            .unwrap();
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = $1").bind(newest).execute(&mut admin).await.unwrap();
    let rights = console.connect_server(server.auditor("MESH_TLS_CA"), &password, true).await.expect("older");
    let status = console.status().await;
    let notice = status.schema_notice.clone().expect("an older schema is announced");
    assert!(notice.contains("mesh-memory db migrate") && notice.contains(&newest.to_string()), "{notice}");
    assert!(!rights.can_approve && rights.limitation.as_deref() == Some(notice.as_str()));
    let store = console.store().await.unwrap();
    assert!(!store.list_runtime_agents().await.unwrap().is_empty(), "reads still work");
    let write = sqlx::query("UPDATE memory_entries SET always_on = always_on WHERE false").execute(store.pool()).await;
    let code = write.unwrap_err().as_database_error().and_then(|e| e.code()).map(|c| c.into_owned());
    assert_eq!(code.as_deref(), Some("25006"), "the server refuses writes in the read-only session");
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES ($1, $2, true, $3, $4)",
    )
    .bind(newest)
    .bind(&row.0)
    .bind(&row.1)
    .bind(row.2)
    .execute(&mut admin)
    .await
    .unwrap();

    // A newer database (a migration this console does not know): refused, naming both versions.
    let future = 29991231000000_i64;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES ($1, 'from a newer release', true, '\\x00', 0)",
    )
    .bind(future)
    .execute(&mut admin)
    .await
    .unwrap();
    let newer = console.connect_server(server.auditor("MESH_TLS_CA"), &password, true).await.unwrap_err();
    assert!(newer.message.contains(&future.to_string()) && newer.message.contains(&newest.to_string()), "{newer:?}");
    assert!(!console.status().await.connected, "a refused connection leaves the console unconnected");
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = $1").bind(future).execute(&mut admin).await.unwrap();

    // Back to normal; disconnecting returns to the connection screen.
    console.connect_server(server.auditor("MESH_TLS_CA"), &password, false).await.expect("current again");
    assert_eq!(console.status().await.schema_notice, None);
    console.disconnect().await.unwrap();
    assert!(!console.status().await.connected);
    assert!(console.store().await.is_err(), "no session after disconnecting");
    console.close().await;
}
