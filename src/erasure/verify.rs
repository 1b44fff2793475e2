//! `erase verify`: anyone with read access (and the master key, for the text scan) checks that
//! an erasure's bodies are markers, no embedding or projection row is left, no planner
//! statistics older than the erasure survive in a table it rewrote, and no stored text holds a
//! fingerprint of the erased text.
//!
//! The text scan reads every place of the schema a copy could sit in, each the way it stores
//! text: text and JSON columns (every [`readings`](super::fingerprint::readings) of a value, a
//! JSON document string by string), arrays of text or JSON element by element (and joined, for a
//! text split across elements), `tsvector` columns as their lexemes in position order, and the
//! planner's statistics (`pg_stats`' most common values, histogram bounds and most common
//! elements, which sample stored values and which every reader of the table may see). What an
//! erasure records for it is [`erasure_fingerprints`]: windows of the erased texts' words and of
//! their `tsvector` lexemes under the store's text search configuration.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgPool, Row};
use uuid::Uuid;

use super::fingerprint::{readings, Fingerprint};
use super::{ErasureError, FingerprintKey};
use crate::ids::RevisionId;

/// One place (a column, or a column's planner statistics) in which a fingerprint of the erased
/// text was found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct TextFound {
    /// Table.
    pub table: String,
    /// Column; for planner statistics `<column> (pg_stats.<field>)`.
    pub column: String,
    /// Rows holding a fingerprint (for statistics: sampled values holding one).
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
    /// Tables an erasure rewrites (those `mesh_eraser` may maintain) whose planner statistics
    /// were gathered before this erasure: they may still sample erased text or its lexemes.
    /// `ANALYZE` them.
    pub stale_statistics: Vec<String>,
    /// Text, JSON, array and `tsvector` columns scanned (0 when the scan could not run).
    pub columns_scanned: u32,
    /// Values scanned (array elements and sampled statistics values included).
    pub values_scanned: u32,
    /// Planner statistics arrays scanned (`pg_stats` and extended statistics).
    pub statistics_scanned: u32,
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
            && self.stale_statistics.is_empty()
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
        if !self.stale_statistics.is_empty() {
            writeln!(f, "  statistics older than the erasure: {} (ANALYZE them)", self.stale_statistics.join(", "))?;
        }
        match &self.text_scan_unavailable {
            Some(why) => writeln!(f, "  text scan:             not run ({why})")?,
            None => writeln!(
                f,
                "  text found:            {} ({} values in {} text, JSON, array and tsvector columns and {} \
                 statistics scanned)",
                self.text_found.iter().map(|t| t.rows).sum::<u32>(),
                self.values_scanned,
                self.columns_scanned,
                self.statistics_scanned
            )?,
        }
        for t in &self.text_found {
            writeln!(f, "    {}.{}: {} rows", t.table, t.column, t.rows)?;
        }
        write!(f, "{}", if self.is_clean() { "verified: nothing of it is left" } else { "NOT CLEAN" })
    }
}

/// Checks an erasure: markers, embeddings, projection rows, the age of the rewritten tables'
/// statistics, and (with `key`) a scan of every text, JSON, array and `tsvector` column and of
/// the planner statistics of the schema for a fingerprint of the erased text. Needs only read
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
        stale_statistics: stale_statistics(pool, erasure).await?,
        columns_scanned: 0,
        values_scanned: 0,
        statistics_scanned: 0,
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

/// What an erasure records for `verify` (in the erasure's transaction, before the text goes):
/// the fingerprints of every reading of each erased text, and of its lexemes under each text
/// search configuration the schema's `tsvector` columns use. None without a key.
pub(crate) async fn erasure_fingerprints<'a>(
    tx: &mut PgConnection,
    key: Option<&FingerprintKey>,
    bodies: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<Vec<u8>>, sqlx::Error> {
    let Some(key) = key else { return Ok(Vec::new()) };
    let texts: BTreeSet<String> = bodies.into_iter().flat_map(readings).collect();
    let mut found: BTreeSet<Fingerprint> = texts.iter().flat_map(|text| key.of_text(text)).collect();
    for lexemes in lexeme_sequences(tx, &texts.into_iter().collect::<Vec<_>>()).await? {
        found.extend(key.of_lexemes(&lexemes));
    }
    Ok(found.into_iter().map(|f| f.to_vec()).collect())
}

/// The lexemes, in position order, of `to_tsvector(config, text)` for each text and each
/// configuration a generated `tsvector` column of the schema names (`memory_entry_revisions.
/// body_tsv`: `english`), and the server's default configuration.
async fn lexeme_sequences(tx: &mut PgConnection, texts: &[String]) -> Result<Vec<Vec<String>>, sqlx::Error> {
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    sqlx::query_scalar(
        "WITH configs AS (
             SELECT DISTINCT substring(pg_get_expr(d.adbin, d.adrelid) FROM 'to_tsvector\\(''([^'']+)''::regconfig')
                      AS config
               FROM pg_attrdef d
               JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
               JOIN pg_class c ON c.oid = d.adrelid
              WHERE c.relnamespace = current_schema()::regnamespace AND a.atttypid = 'tsvector'::regtype
             UNION
             SELECT get_current_ts_config()::text)
         SELECT ARRAY(SELECT u.lexeme FROM unnest(to_tsvector(g.config::regconfig, t.body)) u, unnest(u.positions) p
                       ORDER BY p, u.lexeme)
           FROM unnest($1::text[]) AS t(body), configs g
          WHERE g.config IS NOT NULL",
    )
    .bind(texts)
    .fetch_all(tx)
    .await
}

/// Tables an erasure rewrites (those `mesh_eraser` may `MAINTAIN`, which the erasure vacuums and
/// analyses) that have planner statistics gathered before the erasure, or of unknown age.
async fn stale_statistics(pool: &PgPool, erasure: Uuid) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT c.relname::text
           FROM erasures e
          CROSS JOIN pg_class c
           LEFT JOIN pg_stat_all_tables s ON s.relid = c.oid
          WHERE e.id = $1 AND c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p', 'm')
            AND CASE WHEN current_setting('server_version_num')::int >= 170000
                     THEN has_table_privilege('mesh_eraser', c.oid, 'MAINTAIN') ELSE false END
            AND EXISTS (SELECT 1 FROM pg_stats p WHERE p.schemaname = current_schema() AND p.tablename = c.relname)
            AND NOT coalesce(greatest(s.last_analyze, s.last_autoanalyze) > e.erased_at, false)
          ORDER BY 1",
    )
    .bind(erasure)
    .fetch_all(pool)
    .await
}

/// How a scanned column holds text.
#[derive(Clone, Copy)]
enum Holds {
    /// A text or JSON value.
    Text,
    /// An array of text or JSON values (its literal, parsed here).
    Array,
    /// A `tsvector`, read as its lexemes in position order.
    Lexemes,
    /// Bytes, read as UTF-8 (invalid sequences replaced).
    Bytes,
}

/// Every text, JSON, array and `tsvector` column of every table, value by value, then the
/// planner statistics.
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
    let holds = |found: BTreeSet<Fingerprint>| found.iter().any(|f| wanted.contains(f.as_slice()));
    let key_holds = |value: &str| holds(key.of_stored(value));
    // A cursor per column, read in batches: memory stays flat however large the store.
    let mut tx = pool.begin().await?;
    for (table, column, kind, statement) in scanned_columns(&mut tx).await? {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DECLARE erasure_scan NO SCROLL CURSOR FOR {statement}")))
            .execute(&mut *tx)
            .await?;
        let mut found = 0u32;
        loop {
            // Not a cached statement: the cursor's column type differs from one column to the next.
            let batch = sqlx::query("FETCH 1000 FROM erasure_scan").persistent(false).fetch_all(&mut *tx).await?;
            if batch.is_empty() {
                break;
            }
            for row in &batch {
                report.values_scanned += 1;
                let hit = match kind {
                    Holds::Text => holds(key.of_stored(&row.try_get::<String, _>(0)?)),
                    Holds::Array => holds(of_array(key, &row.try_get::<String, _>(0)?)),
                    Holds::Lexemes => holds(key.of_lexemes(&row.try_get::<Vec<String>, _>(0)?)),
                    Holds::Bytes => holds(key.of_stored(&String::from_utf8_lossy(&row.try_get::<Vec<u8>, _>(0)?))),
                };
                found += u32::from(hit);
            }
        }
        sqlx::query("CLOSE erasure_scan").execute(&mut *tx).await?;
        report.columns_scanned += 1;
        if found > 0 {
            report.text_found.push(TextFound { table, column, rows: found });
        }
    }
    tx.rollback().await?;
    scan_statistics(pool, &key_holds, report).await?;
    Ok(())
}

/// The columns to scan and the statement reading each, in every schema but the system ones
/// (the store's own always; another only where the caller may read the table): every column of
/// a type that can hold text, read as text (text, `json`, `xml`, composite, range and other types,
/// a domain over one), arrays of those, `tsvector` and `bytea`. Left out: numbers, booleans,
/// times, bit strings, addresses, geometry, enums, ids and vectors, which cannot hold words.
/// Identifiers come from the catalogue and are quoted by `format('%I')`; no input reaches them.
async fn scanned_columns(tx: &mut PgConnection) -> Result<Vec<(String, String, Holds, String)>, sqlx::Error> {
    let rows: Vec<(String, String, String, String)> = sqlx::query_as(
        "WITH columns AS (
             SELECT n.nspname, c.relname, a.attname, b.typname AS base, b.typcategory AS category,
                    e.typname AS element, e.typcategory AS element_category
               FROM pg_class c
               JOIN pg_namespace n ON n.oid = c.relnamespace
               JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
               JOIN pg_type t ON t.oid = a.atttypid
               JOIN pg_type b ON b.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
               LEFT JOIN pg_type e ON e.oid = b.typelem AND b.typcategory = 'A'
              WHERE n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'
                AND (n.oid = current_schema()::regnamespace OR has_table_privilege(c.oid, 'SELECT'))
                AND (c.relkind IN ('r', 'm') AND NOT c.relispartition OR c.relkind = 'p')
                AND NOT (n.oid = current_schema()::regnamespace AND c.relname = '_sqlx_migrations')),
         kinds AS (
             SELECT *, CASE WHEN base = 'tsvector' THEN 'lexemes' WHEN base = 'bytea' THEN 'bytes'
                            WHEN category = 'A' THEN 'array' ELSE 'text' END AS holds
               FROM columns
              WHERE NOT (coalesce(element_category, category) IN ('N', 'B', 'D', 'T', 'V', 'I', 'G', 'E', 'P', 'X')
                         OR coalesce(element, base) IN ('uuid', 'vector', 'halfvec', 'sparsevec', 'pg_lsn',
                                                        'pg_snapshot', 'txid_snapshot', 'aclitem'))
                AND NOT (category = 'A' AND element IN ('bytea', 'tsvector')))
         SELECT CASE WHEN nspname = current_schema() THEN relname::text ELSE format('%s.%s', nspname, relname) END,
                attname::text, holds,
                CASE holds
                  WHEN 'lexemes' THEN
                    format('SELECT ARRAY(SELECT u.lexeme FROM unnest(%I::tsvector) u, unnest(u.positions) p
                                          ORDER BY p, u.lexeme)
                              FROM %I.%I WHERE %I IS NOT NULL', attname, nspname, relname, attname)
                  WHEN 'bytes' THEN format('SELECT %I::bytea FROM %I.%I WHERE %I IS NOT NULL',
                                           attname, nspname, relname, attname)
                  ELSE format('SELECT %I::text FROM %I.%I WHERE %I IS NOT NULL', attname, nspname, relname, attname)
                END
           FROM kinds
          ORDER BY 1, 2",
    )
    .fetch_all(tx)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(table, column, holds, statement)| {
            let holds = match holds.as_str() {
                "lexemes" => Holds::Lexemes,
                "bytes" => Holds::Bytes,
                "array" => Holds::Array,
                _ => Holds::Text,
            };
            (table, column, holds, statement)
        })
        .collect())
}

/// The fingerprints of an array literal: of each element (text or JSON), and of the elements
/// joined by spaces (a text split across elements).
fn of_array(key: &FingerprintKey, literal: &str) -> BTreeSet<Fingerprint> {
    let elements = array_elements(literal);
    let mut found: BTreeSet<Fingerprint> = elements.iter().flat_map(|e| key.of_stored(e)).collect();
    found.extend(key.of_stored(&elements.join(" ")));
    found
}

/// The planner statistics of the schema's tables (`pg_stats`) and extended statistics
/// (`pg_stats_ext`, `pg_stats_ext_exprs`): every sampled value, element by element.
async fn scan_statistics(
    pool: &PgPool,
    holds: &impl Fn(&str) -> bool,
    report: &mut ErasureVerification,
) -> Result<(), sqlx::Error> {
    let sampled: Vec<(String, String, String, String)> = sqlx::query_as(
        "SELECT CASE WHEN s.schemaname = current_schema() THEN s.tablename::text ELSE format('%s.%s', s.schemaname, s.tablename) END, s.attname::text, x.field, x.vals
           FROM pg_stats s
          CROSS JOIN LATERAL (VALUES ('most_common_vals', s.most_common_vals::text),
                                     ('histogram_bounds', s.histogram_bounds::text),
                                     ('most_common_elems', s.most_common_elems::text)) AS x(field, vals)
          WHERE s.schemaname NOT LIKE 'pg\\_%' AND s.schemaname <> 'information_schema' AND x.vals IS NOT NULL
         UNION ALL
         SELECT CASE WHEN s.schemaname = current_schema() THEN s.tablename::text ELSE format('%s.%s', s.schemaname, s.tablename) END, s.statistics_name::text, x.field, x.vals
           FROM pg_stats_ext_exprs s
          CROSS JOIN LATERAL (VALUES ('most_common_vals', s.most_common_vals::text),
                                     ('histogram_bounds', s.histogram_bounds::text),
                                     ('most_common_elems', s.most_common_elems::text)) AS x(field, vals)
          WHERE s.schemaname NOT LIKE 'pg\\_%' AND s.schemaname <> 'information_schema' AND x.vals IS NOT NULL
         UNION ALL
         SELECT CASE WHEN s.schemaname = current_schema() THEN s.tablename::text ELSE format('%s.%s', s.schemaname, s.tablename) END, s.statistics_name::text, 'most_common_vals', s.most_common_vals::text
           FROM pg_stats_ext s
          WHERE s.schemaname NOT LIKE 'pg\\_%' AND s.schemaname <> 'information_schema'
            AND s.most_common_vals IS NOT NULL
          ORDER BY 1, 2, 3",
    )
    .fetch_all(pool)
    .await?;
    let mut found: BTreeMap<(String, String), u32> = BTreeMap::new();
    for (table, column, field, literal) in sampled {
        report.statistics_scanned += 1;
        for value in array_elements(&literal) {
            report.values_scanned += 1;
            if holds(&value) || bytea_text(&value).is_some_and(|text| holds(&text)) {
                *found.entry((table.clone(), format!("{column} (pg_stats.{field})"))).or_default() += 1;
            }
        }
    }
    report.text_found.extend(found.into_iter().map(|((table, column), rows)| TextFound { table, column, rows }));
    Ok(())
}

/// The elements of a PostgreSQL array literal as `array_out` writes it (`{a,"b c",NULL}`),
/// unquoted and unescaped, nested arrays flattened, a `[1:2]=` dimension prefix skipped and
/// NULLs left out.
fn array_elements(literal: &str) -> Vec<String> {
    let body = match (literal.starts_with('['), literal.find('=')) {
        (true, Some(at)) => &literal[at + 1..],
        _ => literal,
    };
    let mut elements = Vec::new();
    let mut current: Option<(String, bool)> = None;
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        match c {
            '{' | '}' | ',' => finish_element(current.take(), &mut elements),
            '"' => {
                let (text, quoted) = current.get_or_insert_with(|| (String::new(), true));
                *quoted = true;
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => text.extend(chars.next()),
                        '"' => break,
                        c => text.push(c),
                    }
                }
            }
            '\\' => current.get_or_insert_with(|| (String::new(), false)).0.extend(chars.next()),
            c if c.is_whitespace() && current.is_none() => {}
            c => current.get_or_insert_with(|| (String::new(), false)).0.push(c),
        }
    }
    finish_element(current, &mut elements);
    elements
}

/// A `bytea` value as `pg_stats` writes it (`\\x44616e61`), read as UTF-8.
fn bytea_text(value: &str) -> Option<String> {
    let bytes = hex::decode(value.strip_prefix("\\x")?).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

fn finish_element(element: Option<(String, bool)>, elements: &mut Vec<String>) {
    if let Some((text, quoted)) = element {
        if quoted || !text.trim().eq_ignore_ascii_case("NULL") {
            elements.push(text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::array_elements;

    #[test]
    fn array_literals_are_read_element_by_element() {
        assert_eq!(array_elements("{}"), Vec::<String>::new());
        assert_eq!(array_elements("{a,NULL,\"NULL\",b}"), ["a", "NULL", "b"]);
        assert_eq!(
            array_elements(r#"{"Dana keeps, the \"key\"","back\\slash",{"{\"k\": \"v\"}"}}"#),
            ["Dana keeps, the \"key\"", "back\\slash", "{\"k\": \"v\"}"]
        );
        assert_eq!(array_elements("[0:1]={x,y}"), ["x", "y"]);
    }

    #[test]
    fn bytea_statistics_read_as_text() {
        assert_eq!(super::bytea_text("\\x44616e61").as_deref(), Some("Dana"));
        assert_eq!(super::bytea_text("Dana"), None);
    }
}
