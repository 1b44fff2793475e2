//! The CLI over TLS against a PostgreSQL that requires it: `scripts/tls-test-server.sh` starts
//! the embedded cluster behind `examples/pg_tls_proxy.rs` (TLS terminated on 127.0.0.1 with a
//! certificate for `localhost` from a CA made for the test; the embedded build has no SSL), and a
//! second proxy that offers no TLS. Each connection failure must name its cause.
//!
//! Needs the proxy built (`cargo test --all-targets` builds examples; alone, this test builds it).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use mesh_memory::database::{self, ConnectError};
use mesh_memory::operator::{OperatorError, OperatorSession};
use mesh_memory::store::StoreError;

/// The servers the script started, stopped (and their directory removed) when dropped.
struct TlsServer {
    dir: PathBuf,
    vars: HashMap<String, String>,
}

impl TlsServer {
    fn start() -> Self {
        // A short directory: the cluster's unix socket path must stay under 108 bytes.
        let dir = std::env::temp_dir().join(format!("mm-tls-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]));
        let out = script("start", &dir);
        let mut server = TlsServer { dir, vars: HashMap::new() };
        assert!(out.status.success(), "tls-test-server.sh start failed: {}", String::from_utf8_lossy(&out.stderr));
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            let (key, value) = line.split_once('=').unwrap_or_else(|| panic!("not KEY=value: {line}"));
            server.vars.insert(key.to_owned(), value.trim_matches('\'').to_owned());
        }
        server
    }

    fn var(&self, key: &str) -> &str {
        self.vars.get(key).unwrap_or_else(|| panic!("the script printed no {key}"))
    }

    /// A URL as `role:password` on `host:port`, database `database`, with `query`.
    fn url(&self, credentials: &str, host_port: &str, database: &str, query: &str) -> String {
        format!("postgres://{credentials}@{host_port}/{database}?{query}")
    }

    /// The auditor on the TLS port of `host`, with `query`.
    fn auditor_url(&self, host: &str, query: &str) -> String {
        let credentials = format!("{}:{}", self.var("MESH_TLS_AUDITOR"), self.var("MESH_TLS_AUDITOR_PASSWORD"));
        self.url(&credentials, &format!("{host}:{}", self.var("MESH_TLS_PORT")), self.var("MESH_TLS_DATABASE"), query)
    }

    fn verify_full(&self, ca: &str) -> String {
        format!("sslmode=verify-full&sslrootcert={}", self.var(ca))
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let out = script("stop", &self.dir);
        if !out.status.success() {
            eprintln!("tls-test-server.sh stop failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        std::fs::remove_dir_all(&self.dir).ok();
    }
}

/// Runs `scripts/tls-test-server.sh ACTION DIR` with this build's CLI and proxy.
fn script(action: &str, dir: &Path) -> Output {
    Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/tls-test-server.sh"))
        .args([action, dir.to_str().unwrap()])
        .env("MESH_BIN", env!("CARGO_BIN_EXE_mesh-memory"))
        .env("MESH_TLS_PROXY", proxy())
        .env_remove("DATABASE_URL")
        .output()
        .unwrap()
}

/// The proxy example next to this test's binary (`target/debug/examples`), built if missing.
fn proxy() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap();
    let proxy = profile_dir.join("examples/pg_tls_proxy");
    if !proxy.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let built = Command::new(cargo)
            .args(["build", "--locked", "--example", "pg_tls_proxy"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .unwrap();
        assert!(built.success(), "cargo build --example pg_tls_proxy failed");
    }
    proxy
}

/// The CLI with `url` as DATABASE_URL.
fn cli(url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mesh-memory"))
        .args(args)
        .env("DATABASE_URL", url)
        .env_remove("MESH_LOG")
        .env_remove("PGSSLROOTCERT")
        .env_remove("PGSSLMODE")
        .output()
        .unwrap()
}

/// Runs a read command over `url`; its stderr, asserting that it failed and never printed the
/// password `secret`.
fn refused(url: &str, secret: &str) -> String {
    let out = cli(url, &["turns"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "expected a refusal, got: {}", String::from_utf8_lossy(&out.stdout));
    assert!(!stderr.contains(secret), "the password leaked: {stderr}");
    stderr
}

#[tokio::test]
async fn the_cli_connects_over_verified_tls_and_names_each_failure() {
    let server = TlsServer::start();
    let password = server.var("MESH_TLS_AUDITOR_PASSWORD").to_owned();

    // verify-full, right CA, host name `localhost`: the auditor reads the demo's turns.
    let out = cli(&server.auditor_url("localhost", &server.verify_full("MESH_TLS_CA")), &["turns"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let turns = String::from_utf8_lossy(&out.stdout);
    assert!(turns.contains("delivered"), "the demo's turns: {turns}");

    // Encrypted without verification, and the chain verified without the host name.
    for query in ["sslmode=require".to_owned(), format!("sslmode=verify-ca&sslrootcert={}", server.var("MESH_TLS_CA"))]
    {
        let out = cli(&server.auditor_url("127.0.0.1", &query), &["turns"]);
        assert!(out.status.success(), "{query}: {}", String::from_utf8_lossy(&out.stderr));
    }

    // A CA that did not sign the server's certificate.
    let stderr = refused(&server.auditor_url("localhost", &server.verify_full("MESH_TLS_WRONG_CA")), &password);
    let expected = format!("certificate not trusted (CA {})", server.var("MESH_TLS_WRONG_CA"));
    assert!(stderr.contains(&expected), "{stderr}");
    // Without sslrootcert, the system's CAs, which do not know the test CA.
    let stderr = refused(&server.auditor_url("localhost", "sslmode=verify-full"), &password);
    assert!(stderr.contains("certificate not trusted (CA the system's trusted CAs)"), "{stderr}");

    // The certificate is for `localhost` only.
    let stderr = refused(&server.auditor_url("127.0.0.1", &server.verify_full("MESH_TLS_CA")), &password);
    assert!(stderr.contains("host name 127.0.0.1 does not match the certificate (it is for localhost)"), "{stderr}");

    // Plaintext to the server that requires TLS.
    let stderr = refused(&server.auditor_url("localhost", "sslmode=disable"), &password);
    assert!(stderr.contains("the server requires TLS (connect with sslmode=require or stricter)"), "{stderr}");

    // TLS required of a server that offers none.
    let credentials = format!("{}:{password}", server.var("MESH_TLS_AUDITOR"));
    let plain = format!("localhost:{}", server.var("MESH_PLAIN_PORT"));
    let plain_url = |query: &str| server.url(&credentials, &plain, server.var("MESH_TLS_DATABASE"), query);
    let stderr = refused(&plain_url("sslmode=require"), &password);
    assert!(stderr.contains("the server does not offer TLS but sslmode=require asks for it"), "{stderr}");
    // prefer falls back to plaintext there, as libpq does.
    let out = cli(&plain_url("sslmode=prefer"), &["turns"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // A wrong password names the role, never the password.
    let wrong = server.url(
        &format!("{}:not-the-password", server.var("MESH_TLS_AUDITOR")),
        &format!("localhost:{}", server.var("MESH_TLS_PORT")),
        server.var("MESH_TLS_DATABASE"),
        &server.verify_full("MESH_TLS_CA"),
    );
    let stderr = refused(&wrong, "not-the-password");
    assert!(stderr.contains("password authentication failed for role tls_auditor"), "{stderr}");

    // A database without the schema, reached over verified TLS as the administrator.
    let admin_url = server.var("MESH_TLS_ADMIN_URL").to_owned();
    let admin = database::connect(&admin_url).await.expect("the admin URL connects over verify-full");
    sqlx::query("CREATE DATABASE mesh_empty").execute(&admin).await.unwrap();
    admin.close().await;
    let empty = admin_url.replacen(&format!("/{}?", server.var("MESH_TLS_DATABASE")), "/mesh_empty?", 1);
    let stderr = refused(&empty, &password);
    assert!(stderr.contains("this database has no Mesh Memory schema (run `mesh-memory db migrate`"), "{stderr}");
    let missing = admin_url.replacen(&format!("/{}?", server.var("MESH_TLS_DATABASE")), "/no_such_db?", 1);
    let stderr = refused(&missing, &password);
    assert!(stderr.contains("database no_such_db does not exist"), "{stderr}");

    // The library's own errors are typed, for the console's connection screen.
    let mismatch = database::connect(&server.auditor_url("127.0.0.1", &server.verify_full("MESH_TLS_CA"))).await;
    assert!(matches!(mismatch, Err(ConnectError::HostNameMismatch { ref host, .. }) if host == "127.0.0.1"));
    let untrusted = database::connect(&server.auditor_url("localhost", &server.verify_full("MESH_TLS_WRONG_CA"))).await;
    assert!(matches!(untrusted, Err(ConnectError::CertificateNotTrusted { .. })));
    let closed = database::connect(&server.url(&credentials, "localhost:1", "x", "sslmode=require")).await;
    assert!(matches!(closed, Err(ConnectError::NoServer { ref address, .. }) if address == "localhost:1"));

    // The console's sign-in: the auditor over verify-full, with the auditor's rights; an address
    // where nothing answers fails at once, named like the CLI's.
    let tls_options = database::connect_options(&server.auditor_url("localhost", &server.verify_full("MESH_TLS_CA")))
        .expect("the URL reads");
    let session = OperatorSession::sign_in(&tls_options, server.var("MESH_TLS_AUDITOR"), &password).await.unwrap();
    assert!(session.rights().can_browse && !session.rights().can_approve, "{:?}", session.rights());
    session.close().await;
    let nowhere = tls_options.clone().port(1);
    let started = std::time::Instant::now();
    match OperatorSession::sign_in(&nowhere, server.var("MESH_TLS_AUDITOR"), &password).await {
        Err(OperatorError::Store(StoreError::Database(err))) => {
            let explained = database::explain_connect_error(err, &nowhere).to_string();
            assert_eq!(explained, "no PostgreSQL server answers at localhost:1 (connection refused)");
        }
        Err(other) => panic!("expected a connection error, got {other}"),
        Ok(_) => panic!("nothing listens on port 1"),
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "refused at once, not after the pool's timeout");
}
