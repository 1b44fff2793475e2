//! The schema handshake: on connecting to a server, compare the migrations the database has
//! applied with the ones this binary carries, so that no shell runs its queries against a schema
//! it was not built for. An older database is served read-only (the server enforces it) with a
//! warning telling its administrator to run `mesh-memory db migrate`; a newer one, or one without
//! the schema, is refused with the versions named. Only `db migrate` (and the embedded demo
//! cluster) ever changes a server's schema.

use sqlx::postgres::PgConnectOptions;
use sqlx::PgPool;

use super::MIGRATOR;

/// How a database's applied migrations compare with this binary's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SchemaState {
    /// Every migration of this binary is applied, and no other.
    Current,
    /// The database lacks some of this binary's migrations (and has none this binary lacks):
    /// readable, but this binary's writes may need what is missing, so it opens read-only.
    Older {
        /// The newest migration the database applied (`None`: its history table is empty).
        database_version: Option<i64>,
        /// The newest migration of this binary.
        binary_version: i64,
        /// This binary's migrations the database lacks, oldest first.
        missing: Vec<i64>,
    },
    /// The database applied migrations this binary does not know: a newer mesh-memory migrated
    /// it, and this one's queries may not fit; refused.
    Newer {
        /// The newest migration the database applied.
        database_version: i64,
        /// The newest migration of this binary.
        binary_version: i64,
        /// The applied migrations this binary does not know, oldest first.
        unknown: Vec<i64>,
    },
    /// No Mesh Memory schema: no migration history (`_sqlx_migrations`) or nothing applied.
    Absent,
}

/// The newest migration this binary carries.
pub fn binary_version() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or_default()
}

/// Reads the database's migration history (`_sqlx_migrations`, which every product role may read)
/// and compares it with this binary's migrations. A database without the table is
/// [`SchemaState::Absent`].
pub async fn check_schema(pool: &PgPool) -> Result<SchemaState, sqlx::Error> {
    let has_history: bool =
        sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL").fetch_one(pool).await?;
    if !has_history {
        return Ok(SchemaState::Absent);
    }
    let applied: Vec<i64> = sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success ORDER BY version")
        .fetch_all(pool)
        .await?;
    Ok(compare(&applied, &MIGRATOR.iter().map(|m| m.version).collect::<Vec<_>>()))
}

/// The state of a database that applied `applied` for a binary that carries `known`.
fn compare(applied: &[i64], known: &[i64]) -> SchemaState {
    if applied.is_empty() {
        return SchemaState::Absent;
    }
    let binary_version = known.iter().copied().max().unwrap_or_default();
    let mut unknown: Vec<i64> = applied.iter().copied().filter(|v| !known.contains(v)).collect();
    unknown.sort_unstable();
    let database_version = applied.iter().copied().max();
    if !unknown.is_empty() {
        return SchemaState::Newer { database_version: database_version.unwrap_or_default(), binary_version, unknown };
    }
    let mut missing: Vec<i64> = known.iter().copied().filter(|v| !applied.contains(v)).collect();
    missing.sort_unstable();
    if missing.is_empty() {
        SchemaState::Current
    } else {
        SchemaState::Older { database_version, binary_version, missing }
    }
}

impl SchemaState {
    /// Why a session on this database is read-only, for a banner or a warning line: set only for
    /// an older database.
    pub fn read_only_reason(&self) -> Option<String> {
        self.older_summary().map(|summary| {
            format!("{summary}; it is open read-only: ask its administrator to run `mesh-memory db migrate`")
        })
    }

    /// Why this binary refuses the database, naming the versions: set for a newer database and
    /// for one without the schema.
    pub fn refusal(&self) -> Option<String> {
        match self {
            SchemaState::Newer { database_version, binary_version, unknown } => Some(format!(
                "this database's schema is newer than this mesh-memory (database at migration {database_version}, \
                 this mesh-memory at {binary_version}; {} migration(s) it does not know: {}): use a mesh-memory at \
                 least as new as the database",
                unknown.len(),
                list(unknown)
            )),
            SchemaState::Absent => Some(super::ConnectError::NoSchema.to_string()),
            SchemaState::Current | SchemaState::Older { .. } => None,
        }
    }

    /// Why a process that must write (the MCP server, which records every call) cannot serve
    /// this database: the refusal, or for an older database the missing migrations.
    pub fn refusal_for_writers(&self) -> Option<String> {
        self.refusal().or_else(|| {
            self.older_summary().map(|summary| {
                format!(
                    "{summary}; this command writes, so it needs the schema current: ask its administrator to run \
                     `mesh-memory db migrate`"
                )
            })
        })
    }

    /// Whether sessions on this database are read-only.
    pub fn is_read_only(&self) -> bool {
        matches!(self, SchemaState::Older { .. })
    }

    /// "this database's schema is older than this mesh-memory (...)", for an older database.
    fn older_summary(&self) -> Option<String> {
        let SchemaState::Older { database_version, binary_version, missing } = self else { return None };
        let database = match database_version {
            Some(version) => format!("database at migration {version}"),
            None => "database without any migration".to_owned(),
        };
        Some(format!(
            "this database's schema is older than this mesh-memory ({database}, this mesh-memory at {binary_version}; \
             {} migration(s) missing: {})",
            missing.len(),
            list(missing)
        ))
    }
}

/// Versions as a comma-separated list (the first five, then how many more).
fn list(versions: &[i64]) -> String {
    let shown: Vec<String> = versions.iter().take(5).map(i64::to_string).collect();
    match versions.len().saturating_sub(5) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

/// `options` with every transaction read-only by default (`default_transaction_read_only=on`, a
/// startup setting the server enforces: a write fails with SQLSTATE 25006), for a database whose
/// schema is older than this binary.
pub fn read_only_session(options: PgConnectOptions) -> PgConnectOptions {
    options.options([("default_transaction_read_only", "on")])
}

/// Whether `err` (anywhere in its chain) is the server refusing a write in a read-only
/// transaction (SQLSTATE 25006), so a shell can say why in the handshake's words.
pub fn is_read_only_refusal(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(err);
    while let Some(current) = next {
        if let Some(sqlx::Error::Database(db)) = current.downcast_ref::<sqlx::Error>() {
            if db.code().as_deref() == Some("25006") {
                return true;
            }
        }
        if current.to_string().contains("in a read-only transaction") {
            return true;
        }
        next = current.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_follow_the_applied_versions() {
        let known = [1, 2, 3];
        assert_eq!(compare(&[1, 2, 3], &known), SchemaState::Current);
        assert_eq!(
            compare(&[1, 2], &known),
            SchemaState::Older { database_version: Some(2), binary_version: 3, missing: vec![3] }
        );
        assert_eq!(
            compare(&[1, 2, 3, 4], &known),
            SchemaState::Newer { database_version: 4, binary_version: 3, unknown: vec![4] }
        );
        assert_eq!(compare(&[], &known), SchemaState::Absent);
    }

    #[test]
    fn the_words_name_both_versions() {
        let older = SchemaState::Older { database_version: Some(2), binary_version: 3, missing: vec![3] };
        let reason = older.read_only_reason().unwrap();
        assert!(reason.contains("migration 2") && reason.contains("at 3"), "{reason}");
        assert!(reason.contains("read-only") && reason.contains("mesh-memory db migrate"), "{reason}");
        assert_eq!(older.refusal(), None);
        let newer = SchemaState::Newer { database_version: 4, binary_version: 3, unknown: vec![4] };
        let refusal = newer.refusal().unwrap();
        assert!(refusal.contains("migration 4") && refusal.contains("at 3"), "{refusal}");
        assert_eq!(newer.read_only_reason(), None);
        assert!(SchemaState::Absent.refusal().unwrap().contains("no Mesh Memory schema"));
        assert_eq!(list(&[1, 2, 3, 4, 5, 6, 7]), "1, 2, 3, 4, 5 and 2 more");
    }
}
