//! Connecting to PostgreSQL and applying the schema.
//!
//! The migrations in `migrations/` are embedded at compile time so that the CLI, the console and
//! the tests all run exactly the schema this binary was built against.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;

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

/// Opens a pool on `url`. Connection errors are returned, never retried forever, so a missing
/// server is reported within the acquire timeout.
pub async fn connect(url: &str) -> Result<PgPool, sqlx::Error> {
    let options: PgConnectOptions = url.parse()?;
    pool_options()
        .max_connections(8)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(with_session_settings(options.application_name("mesh-memory")))
        .await
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
    /// The server refused the connection.
    #[error("cannot connect to PostgreSQL: {0}")]
    Connect(#[from] sqlx::Error),
    /// The schema could not be brought up to date.
    #[error("cannot apply migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

/// An open, migrated database, plus the embedded cluster kept up for it (if any).
#[derive(Debug)]
pub struct OpenDatabase {
    /// The pool.
    pub pool: PgPool,
    guard: Option<crate::pg::ClusterGuard>,
}

impl OpenDatabase {
    /// Whether this handle runs on the embedded cluster.
    pub fn is_embedded(&self) -> bool {
        self.guard.is_some()
    }

    /// Closes the pool, then stops the embedded cluster if this process started it.
    pub async fn close(self) {
        self.pool.close().await;
        drop(self.guard);
    }
}

/// Opens `database_url`, or with `None` the embedded default cluster (started if needed and
/// stopped again by [`OpenDatabase::close`] if this call started it). Migrations are applied.
pub async fn open(database_url: Option<&str>) -> Result<OpenDatabase, OpenError> {
    let (url, guard) = match database_url {
        Some(url) => (url.to_owned(), None),
        None => {
            let cluster = crate::pg::EmbeddedCluster::at_default_location()?;
            let guard = cluster.start_guarded()?;
            (guard.cluster().url()?, Some(guard))
        }
    };
    let pool = connect(&url).await?;
    migrate(&pool).await?;
    Ok(OpenDatabase { pool, guard })
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
        use sqlx::ConnectOptions;
        let prefix: String = prefix.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        let name = format!("{prefix}_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let mut conn = admin.connect().await?;
        // The name is built from filtered characters and a generated id, never from raw input.
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut conn).await?;
        Self::open(admin, name, max_connections).await
    }

    /// A pool on the existing database `name`, migrated to this binary's schema.
    async fn open(admin: &PgConnectOptions, name: String, max_connections: u32) -> Result<Self, OpenError> {
        let pool = pool_options()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(with_session_settings(admin.clone().database(&name)))
            .await?;
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
        use sqlx::ConnectOptions;
        let prefix: String = prefix.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        let mut conn = admin.connect().await?;
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
