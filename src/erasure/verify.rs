//! `erase verify`: anyone with read access (and the master key, for the text scan) checks that
//! an erasure's bodies are markers, no embedding or projection row is left, and no stored text
//! holds a fingerprint of the erased text.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};
use sqlx::{PgPool, Row};
use uuid::Uuid;

use super::{ErasureError, FingerprintKey};
use crate::ids::RevisionId;

/// One text or JSON column in which a fingerprint of the erased text was found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct TextFound {
    /// Table.
    pub table: String,
    /// Column.
    pub column: String,
    /// Rows holding a fingerprint.
    pub rows: u32,
}

/// What `erase verify` found. Clean when every count is zero and nothing was found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct ErasureVerification {
    /// The erasure.
    pub erasure_id: Uuid,
    /// Who erased, when, why: the line lineage and audits show.
    pub erased_by: String,
    /// When (RFC 3339).
    pub erased_at: String,
    /// The reason given.
    pub reason: String,
    /// Erased revisions and messages whose body is not the marker.
    pub bodies_not_erased: u32,
    /// Stored embeddings of erased revisions, any generation.
    pub embeddings_left: u32,
    /// Projection (search) rows of erased revisions.
    pub projection_rows_left: u32,
    /// Text and JSON columns scanned (0 when the scan could not run).
    pub columns_scanned: u32,
    /// Values scanned.
    pub values_scanned: u32,
    /// Where a fingerprint of the erased text was found.
    pub text_found: Vec<TextFound>,
    /// Why the text scan did not run (no fingerprints recorded, or no key given).
    pub text_scan_unavailable: Option<String>,
    /// The external vector index checked (`qdrant`), if one is configured.
    pub external_index: Option<String>,
    /// Points of erased revisions left in it, any generation's collection.
    pub external_points_left: u32,
    /// [`ErasureVerification::is_clean`], for shells that render the report.
    pub clean: bool,
}

impl ErasureVerification {
    /// Nothing of the erased text or its indexes was found.
    pub fn is_clean(&self) -> bool {
        self.bodies_not_erased == 0
            && self.embeddings_left == 0
            && self.projection_rows_left == 0
            && self.external_points_left == 0
            && self.text_found.is_empty()
    }
}

impl fmt::Display for ErasureVerification {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "erasure {}: erased by {} on {}: {}",
            self.erasure_id, self.erased_by, self.erased_at, self.reason
        )?;
        writeln!(f, "  bodies not erased:     {}", self.bodies_not_erased)?;
        writeln!(f, "  embeddings left:       {}", self.embeddings_left)?;
        writeln!(f, "  search rows left:      {}", self.projection_rows_left)?;
        if let Some(index) = &self.external_index {
            writeln!(f, "  {index} points left:    {}", self.external_points_left)?;
        }
        match &self.text_scan_unavailable {
            Some(why) => writeln!(f, "  text scan:             not run ({why})")?,
            None => writeln!(
                f,
                "  text found:            {} ({} values in {} text/JSON columns scanned)",
                self.text_found.iter().map(|t| t.rows).sum::<u32>(),
                self.values_scanned,
                self.columns_scanned
            )?,
        }
        for t in &self.text_found {
            writeln!(f, "    {}.{}: {} rows", t.table, t.column, t.rows)?;
        }
        write!(f, "{}", if self.is_clean() { "verified: nothing of it is left" } else { "NOT CLEAN" })
    }
}

/// Checks an erasure: markers, embeddings, projection rows, and (with `key`) a scan of every
/// text and JSON column of every table for a fingerprint of the erased text. Needs only read
/// access.
pub async fn verify(
    pool: &PgPool,
    erasure: Uuid,
    key: Option<&FingerprintKey>,
) -> Result<ErasureVerification, ErasureError> {
    let Some(row) = sqlx::query(
        "SELECT erased_by, to_char(erased_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS erased_at,
                reason, fingerprinted,
                (SELECT count(*) FROM erased_revisions x JOIN memory_entry_revisions r ON r.id = x.revision_id
                  WHERE x.erasure_id = e.id AND r.body <> memory_erasure_marker())
              + (SELECT count(*) FROM erased_messages x JOIN messages m ON m.id = x.message_id
                  WHERE x.erasure_id = e.id AND m.body <> memory_erasure_marker()) AS bodies,
                (SELECT count(*) FROM erased_revisions x JOIN revision_embeddings v ON v.revision_id = x.revision_id
                  WHERE x.erasure_id = e.id) AS embeddings,
                (SELECT count(*) FROM erased_revisions x JOIN searchable_revisions p ON p.revision_id = x.revision_id
                  WHERE x.erasure_id = e.id) AS projection
           FROM erasures e WHERE e.id = $1",
    )
    .bind(erasure)
    .fetch_optional(pool)
    .await?
    else {
        return Err(ErasureError::UnknownErasure(erasure));
    };
    let mut report = ErasureVerification {
        erasure_id: erasure,
        erased_by: row.get("erased_by"),
        erased_at: row.get("erased_at"),
        reason: row.get("reason"),
        bodies_not_erased: row.get::<i64, _>("bodies") as u32,
        embeddings_left: row.get::<i64, _>("embeddings") as u32,
        projection_rows_left: row.get::<i64, _>("projection") as u32,
        columns_scanned: 0,
        values_scanned: 0,
        text_found: Vec::new(),
        text_scan_unavailable: None,
        external_index: None,
        external_points_left: 0,
        clean: false,
    };
    let fingerprinted: bool = row.get("fingerprinted");
    match (fingerprinted, key) {
        (false, _) => {
            report.text_scan_unavailable =
                Some("the erasure recorded no fingerprints: MESH_AGENT_MASTER_KEY was unset".to_owned())
        }
        (true, None) => {
            report.text_scan_unavailable = Some("set MESH_AGENT_MASTER_KEY to the key the erasure ran with".to_owned())
        }
        (true, Some(key)) => scan_text(pool, erasure, key, &mut report).await?,
    }
    report.clean = report.is_clean();
    Ok(report)
}

/// The revisions an erasure erased (for checking an external vector index).
pub async fn erased_revisions(pool: &PgPool, erasure: Uuid) -> Result<Vec<RevisionId>, sqlx::Error> {
    sqlx::query_scalar("SELECT revision_id FROM erased_revisions WHERE erasure_id = $1 ORDER BY 1")
        .bind(erasure)
        .fetch_all(pool)
        .await
}

/// Every text and JSON column of every table in the schema, value by value.
async fn scan_text(
    pool: &PgPool,
    erasure: Uuid,
    key: &FingerprintKey,
    report: &mut ErasureVerification,
) -> Result<(), ErasureError> {
    let wanted: BTreeSet<Vec<u8>> =
        sqlx::query_scalar("SELECT fingerprint FROM erasure_fingerprints WHERE erasure_id = $1")
            .bind(erasure)
            .fetch_all(pool)
            .await?
            .into_iter()
            .collect();
    // Identifiers come from the catalogue and are quoted by format('%I'); no input reaches them.
    let columns: Vec<(String, String, bool, String)> = sqlx::query_as(
        "SELECT c.table_name::text, c.column_name::text, c.data_type IN ('json', 'jsonb'),
                format('SELECT %I::text FROM %I WHERE %I IS NOT NULL', c.column_name, c.table_name, c.column_name)
           FROM information_schema.columns c
           JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
          WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
            AND c.data_type IN ('text', 'character varying', 'character', 'json', 'jsonb')
            AND c.table_name <> '_sqlx_migrations'
          ORDER BY 1, 2",
    )
    .fetch_all(pool)
    .await?;
    // A cursor per column, read in batches: memory stays flat however large the store.
    let mut tx = pool.begin().await?;
    for (table, column, is_json, statement) in columns {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DECLARE erasure_scan NO SCROLL CURSOR FOR {statement}")))
            .execute(&mut *tx)
            .await?;
        let mut found = 0u32;
        loop {
            let batch: Vec<String> = sqlx::query_scalar("FETCH 1000 FROM erasure_scan").fetch_all(&mut *tx).await?;
            if batch.is_empty() {
                break;
            }
            for value in &batch {
                report.values_scanned += 1;
                if key.of_stored(value, is_json).iter().any(|f| wanted.contains(f.as_slice())) {
                    found += 1;
                }
            }
        }
        sqlx::query("CLOSE erasure_scan").execute(&mut *tx).await?;
        report.columns_scanned += 1;
        if found > 0 {
            report.text_found.push(TextFound { table, column, rows: found });
        }
    }
    tx.rollback().await?;
    Ok(())
}
