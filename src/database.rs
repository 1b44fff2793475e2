//! Connecting to PostgreSQL and applying the schema.
//!
//! The migrations in `migrations/` are embedded at compile time so that the CLI, the console and
//! the tests all run exactly the schema this binary was built against. Connecting reads libpq's
//! TLS settings and names every failure's cause ([`connect`](self::connect_options)); opening a
//! server database checks its schema against this binary's and never migrates it
//! ([`schema`](self::check_schema)): only `mesh-memory db migrate` and the embedded cluster do.

mod connect;
mod schema;

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;

pub(crate) use connect::reach;
pub use connect::{
    connect_options, explain_connect_error, server_address, ssl_mode_name, with_tls, ConnectError, SSL_MODES,
};
pub use schema::{binary_version, check_schema, is_read_only_refusal, read_only_session, SchemaState};

/// The schema history, embedded from `migrations/`. Append-only: never edit a landed file.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// The session settings of every connection this crate opens (pools of the CLI, the console,
/// operators, benchmarks and tests alike, so that tests run what production runs).
///
/// `plan_cache_mode = force_generic_plan`: every statement is prepared once per connection and
/// then planned once. By default PostgreSQL plans a prepared statement afresh on each of its first
/// five executions and keeps doing so whenever the generic plan's estimate looks costlier than the
/// custom plans it saw; for our statements that meant planning on every call (0.5–0.8 ms of the
/// withheld-count and hydration statements, more on the write path's trigger-heavy inserts). The
/// statements are written for generic plans: query-side expressions sit in scalar subqueries,
/// eligibility is expressed with the indexes the plans must use, and the refresh functions are
/// PL/pgSQL with cached plans. At 1M revisions, seven alternating runs against the previous
/// binary: remembers 662 -> 781/s on average (docs/benchmarks-history.md, "retrieval at 1M").
pub fn with_session_settings(options: PgConnectOptions) -> PgConnectOptions {
    options.options([("plan_cache_mode", "force_generic_plan")])
}

/// A pooled connection idle for longer than this is checked with a round trip before it is lent.
const IDLE_BEFORE_PING: Duration = Duration::from_secs(30);

/// The pool settings of every pool this crate opens.
///
/// sqlx checks each pooled connection with a round trip (a `Sync` message) every time it is lent
/// out. Every statement run on the pool paid it: a search runs several statements, a group-commit
/// batch one transaction, and on a two-core machine a round trip is a pair of context switches.
/// Only a connection that sat idle long enough to have been dropped by the server or the network
/// is checked now; a connection that breaks in between fails its next statement with an I/O
/// error, as it would have done if it broke just after the check.
pub(crate) fn pool_options() -> PgPoolOptions {
    PgPoolOptions::new().test_before_acquire(false).before_acquire(|conn, meta| {
        Box::pin(async move {
            if meta.idle_for > IDLE_BEFORE_PING {
                sqlx::Connection::ping(conn).await?;
            }
            Ok(true)
        })
    })
}

/// How long a pool waits for a connection before it reports the server as not answering.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens a pool on `url` (TLS settings read as libpq reads them, [`connect_options`]). Connection
/// errors are returned with their cause named, never retried forever.
pub async fn connect(url: &str) -> Result<PgPool, ConnectError> {
    connect_with_options(connect_options(url)?.application_name("mesh-memory"), 8).await
}

/// Opens a pool of at most `max_connections` on `options`, with this crate's pool and session
/// settings. A server that refuses or does not answer is reported at once (the pool alone would
/// retry a refused connection until its acquire timeout); every other failure is named by
/// [`explain_connect_error`].
pub async fn connect_with_options(options: PgConnectOptions, max_connections: u32) -> Result<PgPool, ConnectError> {
    connect::reach_server(&options).await?;
    let options = with_session_settings(options);
    pool_options()
        .max_connections(max_connections)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_with(options.clone())
        .await
        .map_err(|err| explain_connect_error(err, &options))
}

/// One connection (not a pool) on `options`, its failure named like a pool's.
async fn connect_one(options: &PgConnectOptions) -> Result<sqlx::PgConnection, ConnectError> {
    use sqlx::ConnectOptions;
    connect::reach_server(options).await?;
    options.connect().await.map_err(|err| explain_connect_error(err, options))
}

/// Applies every pending migration. Idempotent.
pub async fn migrate(pool: &PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    MIGRATOR.run(pool).await?;
    revoke_temporary_objects(pool).await.map_err(sqlx::migrate::MigrateError::Execute)
}

/// The versions of this binary's migrations not applied to the database yet (read from
/// `_sqlx_migrations`, which every product role may read). A process that runs as a role that may
/// not change the schema (an MCP host's `mesh_runtime` login) checks this instead of migrating.
pub async fn pending_migrations(pool: &PgPool) -> Result<Vec<i64>, sqlx::Error> {
    let applied: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success").fetch_all(pool).await?;
    Ok(MIGRATOR.iter().map(|m| m.version).filter(|version| !applied.contains(version)).collect())
}

/// Takes TEMPORARY on the database from PUBLIC and the product's roles: none of them uses a
/// temporary table, and a temporary object is the one kind a caller can make a `SECURITY
/// DEFINER` function resolve (migration `20261219100000`). Run on every migrate, not once in a migration, because a
/// database's privileges are not copied by `CREATE DATABASE ... TEMPLATE` (how tests and some
/// deployments make databases). A role that does not own the database cannot revoke it: the
/// server's notice says so and nothing fails (the definers are safe without it).
async fn revoke_temporary_objects(pool: &PgPool) -> Result<(), sqlx::Error> {
    sqlx::query(
        "DO $$
         DECLARE
             product_roles text := (SELECT string_agg(quote_ident(rolname), ', ') FROM pg_roles
                                     WHERE rolname IN ('mesh_runtime', 'mesh_operator', 'mesh_console_reader',
                                                       'mesh_eraser', 'mesh_definer'));
         BEGIN
             EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
             IF product_roles IS NOT NULL THEN
                 EXECUTE format('REVOKE TEMPORARY ON DATABASE %I FROM %s', current_database(), product_roles);
             END IF;
         EXCEPTION WHEN insufficient_privilege THEN
             RAISE NOTICE 'cannot revoke TEMPORARY on database % from PUBLIC; ask its owner to', current_database();
         END
         $$",
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Why a database could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The embedded cluster could not be found or started.
    #[error(transparent)]
    Embedded(#[from] crate::pg::PgError),
    /// No connection could be made; the error names the cause.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The schema handshake refused the database (newer than this binary, or without the
    /// schema); the text names the versions and what to do.
    #[error("{refusal}")]
    Schema {
        /// [`SchemaState::refusal`]'s words.
        refusal: String,
    },
    /// A statement failed after connecting (reading the schema's version, making a scratch
    /// database).
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// The schema could not be brought up to date.
    #[error("cannot apply migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

/// An open database, plus the embedded cluster kept up for it (if any), and how its schema
/// compares with this binary's.
#[derive(Debug)]
pub struct OpenDatabase {
    /// The pool (read-only sessions when the schema is older than this binary).
    pub pool: PgPool,
    guard: Option<crate::pg::ClusterGuard>,
    schema: SchemaState,
}

impl OpenDatabase {
    /// Whether this handle runs on the embedded cluster.
    pub fn is_embedded(&self) -> bool {
        self.guard.is_some()
    }

    /// How the database's schema compared with this binary's when it was opened: `Current`, or
    /// `Older` (then the pool is read-only).
    pub fn schema(&self) -> &SchemaState {
        &self.schema
    }

    /// Why the pool is read-only (an older schema), for a warning or a banner; `None` when it
    /// may write.
    pub fn read_only_reason(&self) -> Option<String> {
        self.schema.read_only_reason()
    }

    /// Closes the pool, then stops the embedded cluster if this process started it.
    pub async fn close(self) {
        self.pool.close().await;
        drop(self.guard);
    }
}

/// Opens `database_url`, or with `None` the embedded default cluster (started if needed and
/// stopped again by [`OpenDatabase::close`] if this call started it).
///
/// A server database is never migrated here: its schema is compared with this binary's
/// ([`check_schema`]); current opens as is, older opens read-only (its reason in
/// [`OpenDatabase::read_only_reason`], for the caller to show), newer or absent is refused
/// ([`OpenError::Schema`]). The embedded cluster is this binary's own and is migrated (unless a
/// newer binary migrated it).
pub async fn open(database_url: Option<&str>) -> Result<OpenDatabase, OpenError> {
    match database_url {
        Some(url) => open_server(connect_options(url)?.application_name("mesh-memory")).await,
        None => open_embedded().await,
    }
}

/// Opens a server database after the schema handshake (see [`open`]).
pub async fn open_server(options: PgConnectOptions) -> Result<OpenDatabase, OpenError> {
    let pool = connect_with_options(options.clone(), 8).await?;
    let schema = match handshake(&pool, &options).await {
        Ok(schema) => schema,
        Err(err) => {
            pool.close().await;
            return Err(err);
        }
    };
    let pool = if schema.is_read_only() {
        pool.close().await;
        connect_with_options(read_only_session(options), 8).await?
    } else {
        pool
    };
    Ok(OpenDatabase { pool, guard: None, schema })
}

/// The schema state of the database behind `pool`, or the refusal of a newer or absent schema.
/// A role that may not read the migration history is told which group to ask for.
async fn handshake(pool: &PgPool, options: &PgConnectOptions) -> Result<SchemaState, OpenError> {
    let schema = check_schema(pool).await.map_err(|err| match &err {
        sqlx::Error::Database(db) if db.code().as_deref() == Some("42501") => OpenError::Schema {
            refusal: format!(
                "role {role} may not read this database's schema version (_sqlx_migrations); ask an administrator \
                 to GRANT mesh_console_reader TO {role}",
                role = options.get_username()
            ),
        },
        _ => OpenError::Database(err),
    })?;
    match schema.refusal() {
        Some(refusal) => Err(OpenError::Schema { refusal }),
        None => Ok(schema),
    }
}

/// Starts (if needed) and opens the embedded default cluster, migrated to this binary's schema.
async fn open_embedded() -> Result<OpenDatabase, OpenError> {
    let cluster = crate::pg::EmbeddedCluster::at_default_location()?;
    let guard = cluster.start_guarded()?;
    let pool = connect(&guard.cluster().url()?).await?;
    let schema = check_schema(&pool).await?;
    if let (SchemaState::Newer { .. }, Some(refusal)) = (&schema, schema.refusal()) {
        pool.close().await;
        return Err(OpenError::Schema { refusal });
    }
    migrate(&pool).await?;
    Ok(OpenDatabase { pool, guard: Some(guard), schema: SchemaState::Current })
}

/// A throwaway, migrated database on the same server, for benchmarks and evaluations that must
/// not mix their synthetic rows into real memory. Dropped by [`ScratchDatabase::drop_database`].
#[derive(Debug)]
pub struct ScratchDatabase {
    /// The pool on the scratch database.
    pub pool: PgPool,
    /// Its generated name.
    pub name: String,
    admin: PgConnectOptions,
}

impl ScratchDatabase {
    /// Creates `<prefix>_<random>` next to the database `admin` points at and migrates it.
    pub async fn create(admin: &PgConnectOptions, prefix: &str, max_connections: u32) -> Result<Self, OpenError> {
        let prefix: String = prefix.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        let name = format!("{prefix}_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let mut conn = connect_one(admin).await?;
        // The name is built from filtered characters and a generated id, never from raw input.
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await?;
        Self::open(admin, name, max_connections).await
    }

    /// A pool on the existing database `name`, migrated to this binary's schema.
    async fn open(admin: &PgConnectOptions, name: String, max_connections: u32) -> Result<Self, OpenError> {
        let options = with_session_settings(admin.clone().database(&name));
        let pool = pool_options()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options.clone())
            .await
            .map_err(|err| explain_connect_error(err, &options))?;
        migrate(&pool).await?;
        Ok(ScratchDatabase { pool, name, admin: admin.clone() })
    }

    /// Reopens the newest database named `<prefix>_<random>` (one [`ScratchDatabase::create`]
    /// made and was told to keep), migrated to this binary's schema; `None` when there is none.
    /// Lets a benchmark measure a large store again without loading it again.
    pub async fn reopen_latest(
        admin: &PgConnectOptions,
        prefix: &str,
        max_connections: u32,
    ) -> Result<Option<Self>, OpenError> {
        let prefix: String = prefix.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        let mut conn = connect_one(admin).await?;
        let name: Option<String> = sqlx::query_scalar(
            "SELECT d.datname::text FROM pg_database d
              WHERE d.datname ~ ('^' || $1 || '_[0-9a-f]{12}$')
              ORDER BY d.oid DESC
              LIMIT 1",
        )
        .bind(&prefix)
        .fetch_optional(&mut conn)
        .await?;
        let Some(name) = name else { return Ok(None) };
        Ok(Some(Self::open(admin, name, max_connections).await?))
    }

    /// Closes the pool and drops the database.
    pub async fn drop_database(self) -> Result<(), sqlx::Error> {
        use sqlx::ConnectOptions;
        self.pool.close().await;
        let mut conn = self.admin.connect().await?;
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {}", self.name))).execute(&mut conn).await?;
        Ok(())
    }
}
