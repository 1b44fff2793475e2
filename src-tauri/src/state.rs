//! The console's process state: the database it opened (and the embedded cluster it keeps up),
//! and the operator session, if someone signed in.

use mesh_memory::database::{self, OpenDatabase};
use mesh_memory::operator::{OperatorError, OperatorSession};
use mesh_memory::store::{self, Store};
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgPool};
use tokio::sync::{Mutex, RwLock};

use crate::dto;
use crate::error::{database_error, ConsoleError, ErrorKind};

/// Everything the commands share.
pub struct Console {
    opened: Result<Opened, String>,
    session: RwLock<Option<OperatorSession>>,
    /// Why the last session ended without a sign-out.
    ended: RwLock<Option<String>>,
    database: Mutex<Option<OpenDatabase>>,
}

struct Opened {
    admin: PgPool,
    server: PgConnectOptions,
    embedded: bool,
    label: String,
}

impl Console {
    /// Opens `DATABASE_URL`, or the embedded default cluster when it is unset (starting it; it is
    /// stopped again by [`Console::close`]). A failure is kept and shown by the UI.
    pub async fn open(database_url: Option<&str>) -> Self {
        match database::open(database_url).await {
            Ok(db) => {
                let admin = db.pool.clone();
                let server = (*admin.connect_options()).clone();
                let place = match server.get_socket() {
                    Some(dir) => format!("socket {}", dir.display()),
                    None => format!("{}:{}", server.get_host(), server.get_port()),
                };
                let label = format!("{place} / {}", server.get_database().unwrap_or("(default database)"));
                let embedded = db.is_embedded();
                Self {
                    opened: Ok(Opened { admin, server, embedded, label }),
                    session: RwLock::new(None),
                    ended: RwLock::new(None),
                    database: Mutex::new(Some(db)),
                }
            }
            Err(err) => Self {
                opened: Err(format!("cannot open the memory database: {err}")),
                session: RwLock::new(None),
                ended: RwLock::new(None),
                database: Mutex::new(None),
            },
        }
    }

    /// Closes every pool and stops the embedded cluster if this process started it.
    pub async fn close(&self) {
        if let Some(session) = self.session.write().await.take() {
            session.close().await;
        }
        if let Some(db) = self.database.lock().await.take() {
            db.close().await;
        }
    }

    fn opened(&self) -> Result<&Opened, ConsoleError> {
        self.opened.as_ref().map_err(|e| ConsoleError::new(ErrorKind::Database, e.clone()))
    }

    /// Where the console stands (database, first-run need, session). A session whose role the
    /// database no longer accepts ends here, with the reason the sign-in prompt shows.
    pub async fn status(&self) -> dto::ConsoleStatus {
        self.end_refused_session().await;
        let session = self.session.read().await.as_ref().map(|s| s.rights().clone());
        let session_ended = self.ended.read().await.clone();
        match &self.opened {
            Err(e) => dto::ConsoleStatus {
                database_error: Some(e.clone()),
                embedded: false,
                database_label: String::new(),
                needs_first_operator: false,
                session,
                session_ended,
            },
            Ok(o) => {
                let needs_first_operator =
                    o.embedded && store::operator_login_roles(&o.admin).await.map(|r| r.is_empty()).unwrap_or(false);
                dto::ConsoleStatus {
                    database_error: None,
                    embedded: o.embedded,
                    database_label: o.label.clone(),
                    needs_first_operator,
                    session,
                    session_ended,
                }
            }
        }
    }

    /// First run on the embedded cluster: creates the operator login role, then signs in as it.
    pub async fn create_first_operator(
        &self,
        role: &str,
        password: &str,
    ) -> Result<store::OperatorRights, ConsoleError> {
        let o = self.opened()?;
        if !o.embedded {
            return Err(ConsoleError::new(
                ErrorKind::Forbidden,
                "operator roles are created by the database administrator when DATABASE_URL is set",
            ));
        }
        if !store::operator_login_roles(&o.admin).await?.is_empty() {
            return Err(ConsoleError::new(ErrorKind::Conflict, "an operator role exists already; sign in with it"));
        }
        mesh_memory::operator::create_console_role(&o.admin, role, password, store::ConsoleRoleKind::Operator).await?;
        self.sign_in(role, password).await
    }

    /// Signs in with the operator's own PostgreSQL login role.
    pub async fn sign_in(&self, role: &str, password: &str) -> Result<store::OperatorRights, ConsoleError> {
        let o = self.opened()?;
        if role.trim().is_empty() || password.is_empty() {
            return Err(ConsoleError::new(ErrorKind::Invalid, "enter your role name and password"));
        }
        let session = match OperatorSession::sign_in(&o.server, role, password).await {
            Ok(session) => session,
            Err(OperatorError::Store(store::StoreError::Database(err))) => return Err(database_error(&err)),
            Err(err) => return Err(err.into()),
        };
        let rights = session.rights().clone();
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
