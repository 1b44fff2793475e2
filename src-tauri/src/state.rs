//! The console's process state: where it is connected (nowhere yet, the embedded demo, a server
//! the operator named, or `DATABASE_URL` for scripted use), and the operator session, if someone
//! signed in.
//!
//! On a server the console holds only the signed-in person's own connection: no administrator
//! pool, so what they may do comes from their role alone. The embedded demo and `DATABASE_URL`
//! keep the pool they were opened with, for the demo's first run (creating the first operator
//! role) and for scripts.

use mesh_memory::database::{self, OpenDatabase};
use mesh_memory::operator::{OperatorError, OperatorSession};
use mesh_memory::store::{self, Store};
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgPool};
use tokio::sync::{Mutex, RwLock};

use crate::connections::{SavedConnections, ServerConnection};
use crate::dto;
use crate::error::{database_error, ConsoleError, ErrorKind};

/// Everything the commands share.
pub struct Console {
    /// `DATABASE_URL`, when set: the console opens it at start and offers no other connection.
    scripted_url: Option<String>,
    /// Where the console is connected: `None` shows the connection screen; an error is shown
    /// in its place (for `DATABASE_URL`, which the operator cannot change from the window).
    connection: RwLock<Option<Result<OpenConnection, String>>>,
    session: RwLock<Option<OperatorSession>>,
    /// Why the last session ended without a sign-out.
    ended: RwLock<Option<String>>,
    /// Serialises connecting and disconnecting (a double click must not open two clusters).
    switching: Mutex<()>,
    saved: SavedConnections,
}

/// An open connection target.
struct OpenConnection {
    /// The pool it was opened with: the embedded demo's superuser, or `DATABASE_URL`'s role.
    /// `None` on a server the operator signed in to: the console holds no credential but theirs.
    admin: Option<PgPool>,
    /// The server and database, without credentials, for (re-)signing in.
    server: PgConnectOptions,
    embedded: bool,
    label: String,
    /// Why the session is read-only (the database's schema is older than this console).
    schema_notice: Option<String>,
    /// The opened database (and the embedded cluster it keeps up), closed on disconnect.
    database: Option<OpenDatabase>,
}

impl Console {
    /// The console before any connection: with `DATABASE_URL` it opens that database (a failure
    /// is kept and shown by the UI); without, it waits on the connection screen.
    pub async fn start(scripted_url: Option<String>, saved: SavedConnections) -> Self {
        let console = Self {
            scripted_url: scripted_url.clone(),
            connection: RwLock::new(None),
            session: RwLock::new(None),
            ended: RwLock::new(None),
            switching: Mutex::new(()),
            saved,
        };
        if let Some(url) = scripted_url {
            let opened = open_admin_connection(Some(&url)).await;
            *console.connection.write().await = Some(opened);
        }
        console
    }

    /// Closes every pool and stops the embedded cluster if this process started it.
    pub async fn close(&self) {
        let _switching = self.switching.lock().await;
        self.close_current().await;
    }

    async fn close_current(&self) {
        if let Some(session) = self.session.write().await.take() {
            session.close().await;
        }
        if let Some(Ok(connection)) = self.connection.write().await.take() {
            if let Some(db) = connection.database {
                db.close().await;
            }
        }
        *self.ended.write().await = None;
    }

    /// Started with `DATABASE_URL`: the one database it opened is the only one.
    pub fn is_scripted(&self) -> bool {
        self.scripted_url.is_some()
    }

    /// The server connections remembered from earlier runs (no passwords).
    pub fn saved_connections(&self) -> Vec<ServerConnection> {
        self.saved.list()
    }

    /// Forgets a remembered server connection.
    pub fn forget_connection(&self, connection: &ServerConnection) -> Result<(), ConsoleError> {
        self.saved
            .forget(connection)
            .map_err(|e| ConsoleError::new(ErrorKind::Invalid, format!("cannot update the saved connections: {e}")))
    }

    fn refuse_if_scripted(&self) -> Result<(), ConsoleError> {
        match self.scripted_url {
            Some(_) => Err(ConsoleError::new(
                ErrorKind::Forbidden,
                "this console was started with DATABASE_URL; start it without DATABASE_URL to choose a connection",
            )),
            None => Ok(()),
        }
    }

    /// Opens the local demo: the embedded cluster (started, migrated, and seeded with the demo
    /// workspace on its first use), then the sign-in or first-run form.
    pub async fn connect_demo(&self) -> Result<(), ConsoleError> {
        self.refuse_if_scripted()?;
        let _switching = self.switching.lock().await;
        self.close_current().await;
        let connection = open_admin_connection(None).await.map_err(|e| ConsoleError::new(ErrorKind::Database, e))?;
        if let Some(admin) = &connection.admin {
            seed_demo_once(admin).await?;
        }
        *self.connection.write().await = Some(Ok(connection));
        Ok(())
    }

    /// Connects to a PostgreSQL server as the person's own login role and signs in. The schema
    /// is compared with this console's: an older one gives a read-only session (the server
    /// refuses every write in it), a newer or missing one is refused. Remembered (without the
    /// password) when `remember` is set and the sign-in worked.
    pub async fn connect_server(
        &self,
        target: ServerConnection,
        password: &str,
        remember: bool,
    ) -> Result<store::OperatorRights, ConsoleError> {
        self.refuse_if_scripted()?;
        let server = target.connect_options()?;
        let _switching = self.switching.lock().await;
        self.close_current().await;
        let session = sign_in_at(&server, &target.role, password).await?;
        let schema = database::check_schema(session.store().pool()).await.map_err(|e| schema_unreadable(&e, &target));
        let schema = match schema {
            Ok(schema) => schema,
            Err(err) => {
                session.close().await;
                return Err(err);
            }
        };
        if let Some(refusal) = schema.refusal() {
            session.close().await;
            return Err(ConsoleError::new(ErrorKind::Database, refusal));
        }
        let (session, server, schema_notice) = match schema.read_only_reason() {
            None => (session, server, None),
            Some(reason) => {
                session.close().await;
                let read_only = database::read_only_session(server);
                (sign_in_at(&read_only, &target.role, password).await?, read_only, Some(reason))
            }
        };
        let rights = session_rights(&session, schema_notice.as_deref());
        *self.connection.write().await = Some(Ok(OpenConnection {
            admin: None,
            server,
            embedded: false,
            label: target.label(),
            schema_notice,
            database: None,
        }));
        *self.session.write().await = Some(session);
        if remember {
            if let Err(err) = self.saved.remember(&target) {
                tracing::warn!("could not save the connection: {err}");
            }
        }
        Ok(rights)
    }

    /// Signs out and closes the connection (stopping the embedded demo cluster if this console
    /// started it); the connection screen shows again.
    pub async fn disconnect(&self) -> Result<(), ConsoleError> {
        self.refuse_if_scripted()?;
        let _switching = self.switching.lock().await;
        self.close_current().await;
        Ok(())
    }

    /// Where the console stands (connection, first-run need, session). A session whose role the
    /// database no longer accepts ends here, with the reason the sign-in prompt shows.
    pub async fn status(&self) -> dto::ConsoleStatus {
        self.end_refused_session().await;
        let session = self.session.read().await.as_ref().map(|s| s.rights().clone());
        let session_ended = self.ended.read().await.clone();
        let connection = self.connection.read().await;
        let mut status = dto::ConsoleStatus {
            connected: false,
            scripted: self.scripted_url.is_some(),
            database_error: None,
            embedded: false,
            database_label: String::new(),
            needs_first_operator: false,
            schema_notice: None,
            session: None,
            session_ended,
        };
        match connection.as_ref() {
            None => {}
            Some(Err(e)) => status.database_error = Some(e.clone()),
            Some(Ok(c)) => {
                status.connected = true;
                status.embedded = c.embedded;
                status.database_label = c.label.clone();
                status.schema_notice = c.schema_notice.clone();
                status.needs_first_operator = match (&c.admin, c.embedded) {
                    (Some(admin), true) => {
                        store::operator_login_roles(admin).await.map(|r| r.is_empty()).unwrap_or(false)
                    }
                    _ => false,
                };
                status.session = session.map(|mut rights| {
                    restrict_to_reading(&mut rights, c.schema_notice.as_deref());
                    rights
                });
            }
        }
        status
    }

    /// The open connection's server options, admin pool and read-only notice.
    async fn opened(&self) -> Result<(PgConnectOptions, Option<PgPool>, bool, Option<String>), ConsoleError> {
        match self.connection.read().await.as_ref() {
            Some(Ok(c)) => Ok((c.server.clone(), c.admin.clone(), c.embedded, c.schema_notice.clone())),
            Some(Err(e)) => Err(ConsoleError::new(ErrorKind::Database, e.clone())),
            None => Err(ConsoleError::new(ErrorKind::Database, "not connected: choose a database first")),
        }
    }

    /// First run on the embedded cluster: creates the operator login role, then signs in.
    pub async fn create_first_operator(
        &self,
        role: &str,
        password: &str,
    ) -> Result<store::OperatorRights, ConsoleError> {
        let (_, admin, embedded, _) = self.opened().await?;
        let admin = match (admin, embedded) {
            (Some(admin), true) => admin,
            _ => {
                return Err(ConsoleError::new(
                    ErrorKind::Forbidden,
                    "operator roles on a server are created by its administrator (mesh-memory role create)",
                ))
            }
        };
        if !store::operator_login_roles(&admin).await?.is_empty() {
            return Err(ConsoleError::new(ErrorKind::Conflict, "an operator role exists already; sign in with it"));
        }
        mesh_memory::operator::create_console_role(&admin, role, password, store::ConsoleRoleKind::Operator).await?;
        self.sign_in(role, password).await
    }

    /// Signs in with the operator's own PostgreSQL login role on the open connection.
    pub async fn sign_in(&self, role: &str, password: &str) -> Result<store::OperatorRights, ConsoleError> {
        let (server, _, _, schema_notice) = self.opened().await?;
        let session = sign_in_at(&server, role, password).await?;
        let rights = session_rights(&session, schema_notice.as_deref());
        if let Some(old) = self.session.write().await.replace(session) {
            old.close().await;
        }
        *self.ended.write().await = None;
        Ok(rights)
    }

    /// Ends the session.
    pub async fn sign_out(&self) {
        if let Some(old) = self.session.write().await.take() {
            old.close().await;
        }
        *self.ended.write().await = None;
    }

    /// Ends the session if the database refuses its role now (a connection of the role's pool
    /// cannot be had: password changed or expired, login revoked, role dropped). Connections the
    /// server still holds open keep working, as PostgreSQL's own sessions do.
    async fn end_refused_session(&self) {
        let Some(session) = self.session.read().await.clone() else { return };
        // A new connection, not the pool: pooled connections the server already ended would
        // answer with broken pipes, while a new one is judged by the server as a sign-in is.
        let options = (*session.store().pool().connect_options()).clone();
        let probe = tokio::time::timeout(std::time::Duration::from_secs(5), options.connect()).await;
        let refused = match probe {
            Ok(Ok(connection)) => {
                let _ = connection.close().await;
                false
            }
            Ok(Err(err)) => database_error(&err).kind == ErrorKind::NotSignedIn,
            Err(_) => false,
        };
        if refused {
            if let Some(old) = self.session.write().await.take() {
                old.close().await;
            }
            *self.ended.write().await = Some(format!(
                "Your session as {} ended: the database no longer accepts this role (its password changed or \
                 expired, or it may no longer log in). Sign in again to go on; what you typed is kept.",
                session.role()
            ));
        }
    }

    /// The signed-in operator's session, or `NotSignedIn`. Actions check its rights themselves
    /// ([`OperatorSession`]); reads go through its store.
    pub async fn session(&self) -> Result<OperatorSession, ConsoleError> {
        self.session.read().await.clone().ok_or_else(|| ConsoleError::new(ErrorKind::NotSignedIn, "sign in first"))
    }

    /// The signed-in operator's store, or `NotSignedIn`.
    pub async fn store(&self) -> Result<Store, ConsoleError> {
        Ok(self.session().await?.store().clone())
    }
}

/// Opens the embedded demo (`None`: started and migrated) or `DATABASE_URL` (compared with this
/// console's schema; never migrated) with the pool's own credentials. The error is in words.
async fn open_admin_connection(url: Option<&str>) -> Result<OpenConnection, String> {
    let db = database::open(url).await.map_err(|err| format!("cannot open the memory database: {err}"))?;
    let schema_notice = match url {
        None => None,
        Some(_) => match database::check_schema(&db.pool).await {
            Ok(schema) => schema.read_only_reason(),
            Err(err) => Some(format!("cannot compare the database's schema with this console's: {err}")),
        },
    };
    let admin = db.pool.clone();
    let server = (*admin.connect_options()).clone();
    let place = match server.get_socket() {
        Some(dir) => format!("socket {}", dir.display()),
        None => format!("{}:{}", server.get_host(), server.get_port()),
    };
    let label = format!("{place} / {}", server.get_database().unwrap_or("(default database)"));
    Ok(OpenConnection {
        admin: Some(admin),
        server,
        embedded: db.is_embedded(),
        label,
        schema_notice,
        database: Some(db),
    })
}

/// Seeds the demo workspace into an empty embedded database, as `mesh-memory demo seed` does, so
/// the demo has something to show on its first start (from the package too).
async fn seed_demo_once(admin: &PgPool) -> Result<(), ConsoleError> {
    let store = Store::new(admin.clone());
    if mesh_memory::demo::is_seeded(&store).await? {
        return Ok(());
    }
    mesh_memory::demo::seed(&store)
        .await
        .map(|_| ())
        .map_err(|e| ConsoleError::new(ErrorKind::Database, format!("cannot seed the demo workspace: {e}")))
}

/// Signs in as `role` on `server`; a connection failure is told in words (TLS, certificate,
/// host name, password), never with the password.
async fn sign_in_at(server: &PgConnectOptions, role: &str, password: &str) -> Result<OperatorSession, ConsoleError> {
    if role.trim().is_empty() || password.is_empty() {
        return Err(ConsoleError::new(ErrorKind::Invalid, "enter your role name and password"));
    }
    match OperatorSession::sign_in(server, role, password).await {
        Ok(session) => Ok(session),
        Err(OperatorError::Store(store::StoreError::Database(err))) => Err(connect_error(err, server, role)),
        Err(err) => Err(err.into()),
    }
}

/// A failed sign-in's error: wrong credentials send the operator back to the form
/// (`NotSignedIn`); anything else (TLS, certificate, host, database) is a database error.
fn connect_error(err: sqlx::Error, server: &PgConnectOptions, role: &str) -> ConsoleError {
    let wrong_password = err.as_database_error().and_then(|db| db.code()).as_deref() == Some("28P01");
    let kind = if wrong_password { ErrorKind::NotSignedIn } else { ErrorKind::Database };
    let options = server.clone().username(role.trim());
    ConsoleError::new(kind, database::explain_connect_error(err, &options).to_string())
}

/// Why the schema version could not be read: a role in none of the product's groups may not read
/// `_sqlx_migrations`, and is told which group to ask for.
fn schema_unreadable(err: &sqlx::Error, target: &ServerConnection) -> ConsoleError {
    match err.as_database_error().and_then(|db| db.code()).as_deref() {
        Some("42501") => ConsoleError::new(
            ErrorKind::Forbidden,
            format!(
                "role {role} may not read this database's schema version: it is not an operator, auditor or eraser \
                 here; ask an administrator for one of these roles (mesh-memory role create, or GRANT \
                 mesh_console_reader TO {role})",
                role = target.role.trim()
            ),
        ),
        _ => database_error(err),
    }
}

/// The session's rights, restricted to reading when the schema is older than this console.
fn session_rights(session: &OperatorSession, schema_notice: Option<&str>) -> store::OperatorRights {
    let mut rights = session.rights().clone();
    restrict_to_reading(&mut rights, schema_notice);
    rights
}

/// In a read-only session nothing can be approved, reviewed, revoked or erased (the server
/// refuses the writes; the UI disables them and says why).
fn restrict_to_reading(rights: &mut store::OperatorRights, schema_notice: Option<&str>) {
    let Some(reason) = schema_notice else { return };
    rights.can_approve = false;
    rights.can_review_evidence = false;
    rights.can_revoke_tokens = false;
    rights.can_erase = false;
    rights.limitation = Some(reason.to_owned());
    rights.erase_limitation = Some(reason.to_owned());
}
