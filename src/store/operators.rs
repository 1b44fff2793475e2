//! Operator accounts for the console: PostgreSQL login roles of the people who review memory.
//!
//! Operators authenticate to PostgreSQL with their own login role, so that every decision the
//! database records (`session_user` in `operator_actions` and on grants) names a person, not the
//! application. Two group roles matter here: `mesh_operator` (may execute the approve / deny /
//! revoke and evidence-review functions) and `mesh_console_reader` (may only read). A first run on the embedded
//! cluster creates one operator login role; its password is turned into a SCRAM-SHA-256 verifier
//! here, so the clear password never reaches the server or its logs.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sqlx::postgres::PgConnectOptions;
use sqlx::PgPool;

use super::StoreError;

/// The shortest password accepted for a new operator role.
pub const MIN_OPERATOR_PASSWORD_CHARS: usize = 12;

/// PBKDF2 iterations of the SCRAM verifier (PostgreSQL's own default).
const SCRAM_ITERATIONS: u32 = 4096;

/// What a signed-in role may do in the console, and why not, in words the UI shows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct OperatorRights {
    /// The PostgreSQL role the session authenticated as (`session_user`).
    pub role: String,
    /// It may read memory, lineage and audit rows.
    pub can_browse: bool,
    /// It may approve or deny sharing requests (EXECUTE on the operator functions).
    pub can_approve: bool,
    /// It may review sources of unknown audience evidence (EXECUTE on both review functions and
    /// membership in `mesh_operator`, which they check again themselves).
    pub can_review_evidence: bool,
    /// It may revoke MCP access tokens (EXECUTE on `mesh_operator_revoke_access_token`, which
    /// records the role; the token table itself is never writable by a console role).
    pub can_revoke_tokens: bool,
    /// Why `can_approve`, `can_review_evidence`, `can_revoke_tokens` (or `can_browse`) is false,
    /// for the UI.
    pub limitation: Option<String>,
    /// It may erase stored text (a member of `mesh_eraser`: EXECUTE on `mesh_operator_erase`).
    /// Distinct from approving: an organisation gives the one destructive right to fewer people.
    pub can_erase: bool,
    /// Why `can_erase` is false, for the UI.
    pub erase_limitation: Option<String>,
}

/// Which kind of person a new console login role is for, and so which groups it joins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConsoleRoleKind {
    /// Decides sharing requests, reviews evidence, issues and revokes access tokens: a member of
    /// `mesh_operator`.
    Operator,
    /// The same group as [`ConsoleRoleKind::Auditor`] (`mesh_console_reader`), under the name
    /// the console used first; kept so existing callers and saved values still work.
    Reader,
    /// Reads everything the console shows and changes nothing: a member of
    /// `mesh_console_reader` (SELECT on every table, EXECUTE on no operator function).
    Auditor,
    /// Erases stored text (EXECUTE on `mesh_operator_erase`): a member of `mesh_eraser`, and of
    /// `mesh_console_reader` so the console shows them what they may erase. Not an operator:
    /// an organisation gives the one destructive right to fewer people.
    Eraser,
}

impl ConsoleRoleKind {
    /// The group roles a login of this kind is made a member of.
    pub fn groups(self) -> &'static [&'static str] {
        match self {
            ConsoleRoleKind::Operator => &["mesh_operator"],
            ConsoleRoleKind::Reader | ConsoleRoleKind::Auditor => &["mesh_console_reader"],
            ConsoleRoleKind::Eraser => &["mesh_eraser", "mesh_console_reader"],
        }
    }

    /// The `CREATE ROLE` statement for a login role `name` of this kind
    /// ([`console_role_statement`]), for an administrator to run where this process cannot
    /// (`mesh-memory role create --print-sql`).
    pub fn create_role_statement(self, name: &str, password: &str) -> Result<String, StoreError> {
        console_role_statement(name, password, self)
    }
}

/// A role name the console accepts: lower-case letters, digits and `_`, starting with a letter,
/// at most 63 bytes, and not one of the reserved `pg_` / `mesh_` prefixes.
pub fn validate_role_name(name: &str) -> Result<(), StoreError> {
    let valid_chars = name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    let starts_with_letter = name.chars().next().is_some_and(|c| c.is_ascii_lowercase());
    if name.is_empty() || name.len() > 63 || !valid_chars || !starts_with_letter {
        return Err(StoreError::invalid(
            "role",
            "use 1 to 63 lower-case letters, digits or underscores, starting with a letter (e.g. alice_ops)",
        ));
    }
    if name.starts_with("pg_") || name.starts_with("mesh_") {
        return Err(StoreError::invalid("role", "names starting with pg_ or mesh_ are reserved"));
    }
    Ok(())
}

/// The `CREATE ROLE` statement for a login role `name` of `kind`'s groups, with a SCRAM-SHA-256
/// verifier of `password` computed here (a fresh salt each call), so the clear password reaches
/// neither the server nor its logs. Checks the name and the password's length first. Needs no
/// database: `mesh-memory role create --print-sql` prints it for an administrator's psql.
fn console_role_statement(name: &str, password: &str, kind: ConsoleRoleKind) -> Result<String, StoreError> {
    validate_role_name(name)?;
    if password.chars().count() < MIN_OPERATOR_PASSWORD_CHARS {
        return Err(StoreError::invalid(
            "password",
            format!("must be at least {MIN_OPERATOR_PASSWORD_CHARS} characters"),
        ));
    }
    let verifier = scram_verifier(password, uuid::Uuid::new_v4().as_bytes(), SCRAM_ITERATIONS);
    let groups: Vec<String> = kind.groups().iter().map(|group| quote_identifier(group)).collect();
    Ok(format!(
        "CREATE ROLE {} LOGIN PASSWORD {} IN ROLE {}",
        quote_identifier(name),
        quote_literal(&verifier),
        groups.join(", ")
    ))
}

/// `text` as a double-quoted SQL identifier.
fn quote_identifier(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

/// `text` as a single-quoted SQL literal (standard_conforming_strings, PostgreSQL's default).
fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Creates a login role in `kind`'s groups with a SCRAM-SHA-256 password
/// ([`console_role_statement`]). Needs a connection with CREATEROLE (the embedded cluster's
/// superuser, or a server's administrator). Fails with `AlreadyExists` if the role exists.
pub async fn create_console_role(
    admin: &PgPool,
    name: &str,
    password: &str,
    kind: ConsoleRoleKind,
) -> Result<(), StoreError> {
    let statement = console_role_statement(name, password, kind)?;
    let exists: (bool,) =
        sqlx::query_as("SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)").bind(name).fetch_one(admin).await?;
    if exists.0 {
        return Err(StoreError::AlreadyExists { what: format!("role {name}") });
    }
    // The statement holds a checked name (lower-case letters, digits, `_`), a base64 verifier and
    // constant group names, each quoted; utility statements take no bind parameters.
    sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
        .execute(admin)
        .await
        .map_err(|e| StoreError::from_unique(e, || format!("role {name}")))?;
    Ok(())
}

/// Login roles that are (directly or indirectly) members of `mesh_operator`, by name. An empty
/// list on the embedded cluster means the console must create the first one.
pub async fn operator_login_roles(admin: &PgPool) -> Result<Vec<String>, StoreError> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT r.rolname::text FROM pg_roles r
          WHERE r.rolcanlogin AND NOT r.rolsuper
            AND EXISTS (SELECT 1 FROM pg_roles g WHERE g.rolname = 'mesh_operator')
            AND pg_has_role(r.oid, 'mesh_operator', 'MEMBER')
          ORDER BY r.rolname",
    )
    .fetch_all(admin)
    .await?;
    Ok(rows.into_iter().map(|r| r.0).collect())
}

/// Opens a small pool authenticated as `role` on the same server and database as `server`
/// (whose own credentials are not reused). A wrong password is a `Database` error from the
/// server, reported without the password; an address where nothing answers fails at once (an
/// I/O error, not the pool's retries until its timeout). `database::explain_connect_error` names
/// either.
pub async fn connect_as(server: &PgConnectOptions, role: &str, password: &str) -> Result<PgPool, StoreError> {
    let options = server.clone().username(role).password(password).application_name("mesh-memory-console");
    crate::database::reach(&options).await.map_err(sqlx::Error::Io)?;
    Ok(crate::database::pool_options()
        .max_connections(4)
        .acquire_timeout(std::time::Duration::from_secs(10))
        .connect_with(crate::database::with_session_settings(options))
        .await?)
}

/// Whether the login role behind `pool` is a superuser (who bypasses every privilege check, so
/// the operator layer refuses to sign it in).
pub async fn login_is_superuser(pool: &PgPool) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar("SELECT rolsuper FROM pg_roles WHERE rolname = session_user").fetch_one(pool).await?)
}

/// What the role behind `pool` may do, read from the server's own privilege checks (so the UI
/// disables exactly what the database would refuse, and says why).
pub async fn operator_rights(pool: &PgPool) -> Result<OperatorRights, StoreError> {
    let (role, can_browse, can_approve, can_review_evidence, can_revoke_tokens, can_erase): (
        String,
        bool,
        bool,
        bool,
        bool,
        bool,
    ) = sqlx::query_as(
        "SELECT session_user::text,
                has_table_privilege('memory_entries', 'SELECT'),
                to_regprocedure('mesh_operator_approve_sharing(uuid, text)') IS NOT NULL
                AND has_function_privilege('mesh_operator_approve_sharing(uuid, text)', 'EXECUTE'),
                pg_has_role(session_user, 'mesh_operator', 'MEMBER')
                AND to_regprocedure('memory_review_source_evidence(uuid, uuid[], text)') IS NOT NULL
                AND has_function_privilege('memory_review_source_evidence(uuid, uuid[], text)', 'EXECUTE')
                AND to_regprocedure('memory_keep_source_evidence_unknown(uuid, text)') IS NOT NULL
                AND has_function_privilege('memory_keep_source_evidence_unknown(uuid, text)', 'EXECUTE'),
                to_regprocedure('mesh_operator_revoke_access_token(uuid, text)') IS NOT NULL
                AND has_function_privilege('mesh_operator_revoke_access_token(uuid, text)', 'EXECUTE'),
                to_regprocedure('mesh_operator_erase(uuid, text, uuid, uuid, text, uuid[], bytea[])') IS NOT NULL
                AND has_function_privilege('mesh_operator_erase(uuid, text, uuid, uuid, text, uuid[], bytea[])',
                                           'EXECUTE')",
    )
    .fetch_one(pool)
    .await?;
    let limitation = if !can_browse {
        Some(format!(
            "role {role} cannot read the memory tables; ask an administrator to GRANT mesh_console_reader TO {role}"
        ))
    } else if !can_approve || !can_review_evidence || !can_revoke_tokens {
        Some(format!(
            "role {role} is not a member of mesh_operator, so it can browse but not approve or deny sharing \
             requests, review audience evidence or issue or revoke access tokens; ask an administrator to GRANT \
             mesh_operator TO {role}"
        ))
    } else {
        None
    };
    let erase_limitation = (!can_erase).then(|| {
        format!(
            "role {role} is not a member of mesh_eraser, so it cannot erase stored text; ask an administrator to \
             GRANT mesh_eraser TO {role}"
        )
    });
    Ok(OperatorRights {
        role,
        can_browse,
        can_approve,
        can_review_evidence,
        can_revoke_tokens,
        limitation,
        can_erase,
        erase_limitation,
    })
}

/// PostgreSQL's stored SCRAM-SHA-256 verifier for `password` (RFC 5802 / 7677):
/// `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`, all base64.
pub fn scram_verifier(password: &str, salt: &[u8], iterations: u32) -> String {
    let salted = pbkdf2_sha256(password.as_bytes(), salt, iterations);
    let client_key = hmac_sha256(&salted, b"Client Key");
    let stored_key = Sha256::digest(client_key);
    let server_key = hmac_sha256(&salted, b"Server Key");
    format!("SCRAM-SHA-256${iterations}:{}${}:{}", base64(salt), base64(&stored_key), base64(&server_key))
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// PBKDF2-HMAC-SHA256 with one 32-byte output block (all SCRAM needs).
fn pbkdf2_sha256(password: &[u8], salt: &[u8], iterations: u32) -> [u8; 32] {
    let mut block = salt.to_vec();
    block.extend_from_slice(&1u32.to_be_bytes());
    let mut u = hmac_sha256(password, &block);
    let mut out = u;
    for _ in 1..iterations {
        u = hmac_sha256(password, &u);
        out.iter_mut().zip(u.iter()).for_each(|(o, x)| *o ^= x);
    }
    out
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn pbkdf2_matches_rfc7914_vector() {
        // RFC 7914 section 11: PBKDF2-HMAC-SHA256("passwd", "salt", 1), first 32 bytes.
        let out = pbkdf2_sha256(b"passwd", b"salt", 1);
        assert_eq!(hex::encode(out), "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc");
    }

    #[test]
    fn the_statement_quotes_and_names_every_group() {
        let statement = console_role_statement("erin_erase", "twelve chars!", ConsoleRoleKind::Eraser).unwrap();
        assert!(statement.starts_with("CREATE ROLE \"erin_erase\" LOGIN PASSWORD 'SCRAM-SHA-256$4096:"), "{statement}");
        assert!(statement.ends_with("IN ROLE \"mesh_eraser\", \"mesh_console_reader\""), "{statement}");
        assert!(!statement.contains("twelve chars"));
        assert!(console_role_statement("erin", "short", ConsoleRoleKind::Auditor).is_err());
        assert_eq!(quote_identifier("a\"b"), "\"a\"\"b\"");
        assert_eq!(quote_literal("it's"), "'it''s'");
    }

    #[test]
    fn role_names_are_restricted() {
        assert!(validate_role_name("alice_ops").is_ok());
        for bad in ["", "Alice", "1abc", "a-b", "pg_x", "mesh_operator", "a b", &"a".repeat(64)] {
            assert!(validate_role_name(bad).is_err(), "{bad:?} should be refused");
        }
    }
}
