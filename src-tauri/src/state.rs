//! The console's process state: the database it opened (and the embedded cluster it keeps up),
//! and the operator session, if someone signed in.

use mesh_memory::database::{self, OpenDatabase};
use mesh_memory::store::{self, Store};
use sqlx::postgres::PgConnectOptions;
use sqlx::PgPool;
use tokio::sync::{Mutex, RwLock};

use crate::dto;
use crate::error::{database_error, ConsoleError, ErrorKind};

/// A signed-in operator: a pool authenticated as their own login role.
pub struct OperatorSession {
    /// Reads go through the operator's own privileges, never the application's.
    pub store: Store,
    /// What the role may do.
    pub rights: store::OperatorRights,
}

/// Everything the commands share.
pub struct Console {
    opened: Result<Opened, String>,
    session: RwLock<Option<OperatorSession>>,
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
                    database: Mutex::new(Some(db)),
                }
            }
            Err(err) => Self {
                opened: Err(format!("cannot open the memory database: {err}")),
                session: RwLock::new(None),
                database: Mutex::new(None),
            },
        }
    }

    /// Closes every pool and stops the embedded cluster if this process started it.
    pub async fn close(&self) {
        if let Some(session) = self.session.write().await.take() {
            session.store.pool().close().await;
        }
        if let Some(db) = self.database.lock().await.take() {
            db.close().await;
        }
    }

    fn opened(&self) -> Result<&Opened, ConsoleError> {
        self.opened.as_ref().map_err(|e| ConsoleError::new(ErrorKind::Database, e.clone()))
    }

    /// Where the console stands (database, first-run need, session).
    pub async fn status(&self) -> dto::ConsoleStatus {
        let session = self.session.read().await.as_ref().map(|s| s.rights.clone());
        match &self.opened {
            Err(e) => dto::ConsoleStatus {
                database_error: Some(e.clone()),
                embedded: false,
                database_label: String::new(),
                needs_first_operator: false,
                session,
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
        store::create_console_role(&o.admin, role, password, store::ConsoleRoleKind::Operator).await?;
        self.sign_in(role, password).await
    }

    /// Signs in with the operator's own PostgreSQL login role.
    pub async fn sign_in(&self, role: &str, password: &str) -> Result<store::OperatorRights, ConsoleError> {
        let o = self.opened()?;
        let role = role.trim();
        if role.is_empty() || password.is_empty() {
            return Err(ConsoleError::new(ErrorKind::Invalid, "enter your role name and password"));
        }
        let pool = match store::connect_as(&o.server, role, password).await {
            Ok(pool) => pool,
            Err(store::StoreError::Database(err)) => return Err(database_error(&err)),
            Err(err) => return Err(err.into()),
        };
        let rights = store::operator_rights(&pool).await?;
        let session = rights.clone();
        if let Some(old) = self.session.write().await.replace(OperatorSession { store: Store::new(pool), rights }) {
            old.store.pool().close().await;
        }
        Ok(session)
    }

    /// Ends the session.
    pub async fn sign_out(&self) {
        if let Some(old) = self.session.write().await.take() {
            old.store.pool().close().await;
        }
    }

    /// The signed-in operator's store, or `NotSignedIn`.
    pub async fn store(&self) -> Result<Store, ConsoleError> {
        self.session
            .read()
            .await
            .as_ref()
            .map(|s| s.store.clone())
            .ok_or_else(|| ConsoleError::new(ErrorKind::NotSignedIn, "sign in first"))
    }

    /// The signed-in operator's store and role name, if the role may decide sharing requests;
    /// otherwise `Forbidden` with the reason the UI shows.
    pub async fn approver(&self) -> Result<(Store, String), ConsoleError> {
        self.permitted(|rights| rights.can_approve, "this role may not approve").await
    }

    /// The signed-in operator's store, if the role may review audience evidence; otherwise
    /// `Forbidden` with the reason the UI shows. (The database refuses it again on its own.)
    pub async fn evidence_reviewer(&self) -> Result<Store, ConsoleError> {
        let (store, _) =
            self.permitted(|rights| rights.can_review_evidence, "this role may not review evidence").await?;
        Ok(store)
    }

    /// The signed-in operator's store and role name, if the role may revoke MCP access tokens;
    /// otherwise `Forbidden` with the reason the UI shows. (The database refuses it again.)
    pub async fn token_revoker(&self) -> Result<(Store, String), ConsoleError> {
        self.permitted(|rights| rights.can_revoke_tokens, "this role may not revoke access tokens").await
    }

    /// The session's store and role name when `allowed` holds for its rights.
    async fn permitted(
        &self,
        allowed: impl Fn(&store::OperatorRights) -> bool,
        otherwise: &str,
    ) -> Result<(Store, String), ConsoleError> {
        let guard = self.session.read().await;
        let session = guard.as_ref().ok_or_else(|| ConsoleError::new(ErrorKind::NotSignedIn, "sign in first"))?;
        if !allowed(&session.rights) {
            let why = session.rights.limitation.clone().unwrap_or_else(|| otherwise.into());
            return Err(ConsoleError::new(ErrorKind::Forbidden, why));
        }
        Ok((session.store.clone(), session.rights.role.clone()))
    }
}
