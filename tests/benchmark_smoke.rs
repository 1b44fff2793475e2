//! Smoke runs of the quality evaluation (LoCoMo dev split) and the 10k speed benchmark, as CI
//! runs them. They assert sanity only — no errors, zero eligibility violations, searches that find
//! things, hybrid recall at least lexical recall when a vector index is present — never timings:
//! figures are printed for BENCHMARKS.md, targets are read from the report. Built only with the
//! `local-embedder` feature (the hybrid variant needs the local model): `scripts/test.sh` runs it.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use mesh_memory::bench::{self, BenchOptions};
use mesh_memory::evaluation::{self, dataset, EvalOptions};
use mesh_memory::retrieval::RetrievalConfig;

fn locomo_dev_split() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/locomo/locomo-dev.json");
    assert!(
        path.is_file(),
        "the LoCoMo dev split is expected at {} (shared/ beside the checkout; it is never copied into \
         the repository because of its CC BY-NC licence)",
        path.display()
    );
    path
}

#[tokio::test]
async fn locomo_dev_split_evaluates_without_errors_or_violations() {
    let db = common::test_db().await;
    let samples = dataset::read(&locomo_dev_split()).expect("the dev split parses");
    assert_eq!(samples.len(), 6, "the dev split has 6 conversations");
    let embedder = mesh_memory::semantic::local::LocalMiniLm::load_default()
        .expect("the local model (scripts/setup-embedder.sh) is needed for the hybrid variant");
    let options = EvalOptions {
        config: RetrievalConfig::default(),
        embedder: Some(std::sync::Arc::new(embedder)),
        vector_index: mesh_memory::semantic::VectorIndexChoice::PgVector,
        max_samples: None,
        extra_hybrid: Vec::new(),
    };
    let report = evaluation::run_locomo(&db.store, &samples, &options, |_, _| {}).await.expect("evaluation runs");
    println!("{}", evaluation::render_table(&report));
    assert_eq!(report.eligibility_violations, 0);
    assert!(report.questions > 1000, "every question with evidence is asked: {}", report.questions);
    let lexical = &report.overall["lexical"];
    let bm25 = &report.overall["bm25"];
    assert!(lexical.recall_at_10 > 0.2, "lexical retrieval finds evidence: {lexical:?}");
    assert!(bm25.recall_at_10 > 0.2, "the baseline finds evidence: {bm25:?}");
    let hybrid = &report.overall["hybrid"];
    assert!(report.overall["semantic"].recall_at_10 > 0.0, "semantic retrieval finds evidence");
    assert!(
        hybrid.recall_at_10 >= lexical.recall_at_10,
        "hybrid must not lose lexical recall: {hybrid:?} vs {lexical:?}"
    );
    // Answer in context: every question of categories 1-4 with a gold answer is checked against
    // the packed prompt section, and the dated lines hold some answers (figures: BENCHMARKS.md).
    assert!(hybrid.answerable > 800, "categories 1-4 are checked: {hybrid:?}");
    assert!(hybrid.answer_in_context.unwrap_or(0.0) > 0.2, "prompt sections hold answers: {hybrid:?}");
    assert!(report.overall["bm25"].answer_in_context.is_none(), "the baseline renders no section");
}

/// The 10k store as CI measures it: one second per write rate, group commit at 4 and 16 writers.
fn smoke_options() -> BenchOptions {
    BenchOptions {
        sizes: vec![10_000],
        queries: 50,
        write_duration: Duration::from_secs(1),
        writers: 4,
        remember_writers: vec![16],
        keep_databases: true,
        reuse_databases: false,
        hybrid_max_revisions: 10_000,
        vector_indexes: vec![bench::BenchIndex::PgVector],
        query_model: None,
    }
}

#[tokio::test]
async fn the_10k_speed_bench_runs_and_finds_things() {
    let admin: sqlx::postgres::PgConnectOptions = common::admin_url().parse().unwrap();
    let options = smoke_options();
    let run = bench::run(&admin, &options, |stage| eprintln!("bench: {stage}")).await.expect("bench runs");
    let text = bench::render_table(&run);
    println!("{text}");
    // The figures say which server settings they were measured under.
    let server = &run.server;
    assert!(server.version.starts_with(|c: char| c.is_ascii_digit()), "a server version: {server:?}");
    assert!(!server.shared_buffers.is_empty() && ["on", "off"].contains(&server.fsync.as_str()), "{server:?}");
    assert!(["on", "off", "unknown"].contains(&server.huge_pages.as_str()), "{server:?}");
    assert!(text.starts_with(&format!("server: PostgreSQL {}", server.version)), "the text names the server first");
    let report = &run.sizes[0];
    assert_eq!(report.revisions, 10_000);
    assert_eq!(report.lexical.samples, 50);
    assert!(report.lexical_selections_per_query > 0.0, "searches return memories");
    assert!(report.remembers_per_second() > 0.0 && report.amends.per_second > 0.0);
    assert!(report.remembers_one_per_transaction.per_second > 0.0);
    let writers: Vec<usize> = report.remembers_by_writers.iter().map(|rate| rate.writers).collect();
    assert_eq!(writers, [4, 16], "group commit is measured at --writers, then at each --remember-writers");
    for rate in report.remembers_by_writers.iter().chain([&report.remembers_one_per_transaction, &report.amends]) {
        assert!(rate.per_second > 0.0 && rate.latency.samples > 0, "every write rate has latencies: {rate:?}");
        assert!(rate.latency.p50_ms <= rate.latency.p95_ms && rate.latency.p95_ms <= rate.latency.p99_ms);
    }
    assert_eq!(report.hybrid.as_ref().map(|h| h.samples), Some(50), "hybrid recall was measured");

    // `--reuse` measures the kept store again without loading it: same workspace, same queries.
    let again = BenchOptions { queries: 10, keep_databases: false, reuse_databases: true, ..options };
    let reused = bench::run(&admin, &again, |stage| eprintln!("bench (reuse): {stage}")).await.expect("bench reruns");
    let reused = &reused.sizes[0];
    assert_eq!(reused.load_seconds, 0.0, "nothing was loaded");
    assert!(reused.revisions >= 10_000, "the kept store plus the first run's writes");
    assert!(reused.lexical_selections_per_query > 0.0, "the reloaded workspace asks answerable queries");
    let kept = mesh_memory::database::ScratchDatabase::reopen_latest(&admin, "mesh_bench_10000", 2)
        .await
        .expect("reopening")
        .expect("the kept database");
    kept.drop_database().await.expect("dropping the kept database");
}

#[tokio::test]
async fn options_that_measure_nothing_are_refused_before_any_database_work() {
    // A server that does not exist: reaching for it would fail with a setup error instead.
    let admin: sqlx::postgres::PgConnectOptions = "postgres://nobody@127.0.0.1:1/none".parse().unwrap();
    let valid = smoke_options();
    let cases = [
        BenchOptions { writers: 0, ..valid.clone() },
        BenchOptions { remember_writers: vec![8, 0], ..valid.clone() },
        BenchOptions { sizes: vec![10_000, 0], ..valid.clone() },
    ];
    for options in cases {
        let refused = bench::run(&admin, &options, |stage| panic!("nothing may start: {stage}")).await;
        assert!(
            matches!(refused, Err(bench::BenchError::InvalidOptions(_))),
            "refused with a typed error: {refused:?}"
        );
    }
}
