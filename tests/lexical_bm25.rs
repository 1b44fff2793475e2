//! The in-database Okapi BM25 ranking of lexical candidates (migration 20261204100000 and
//! `bm25_score!` in `src/retrieval/candidates.rs`): it ranks like the exact in-Rust BM25 of the
//! evaluation on the same terms, its statistics stay equal to a recomputation after every write
//! path (create, amend, forget, bulk load; repair and review through the projection helper their
//! suites call), and one agent's memories never change another agent's ranking.

mod common;

use std::collections::HashMap;

use common::{assert_lexical_statistics_match_projection, assert_projection_matches_canonical, test_db, World};
use mesh_memory::bench::synthetic::{self, SplitMix, SyntheticSpec};
use mesh_memory::evaluation::bm25::Bm25Index;
use mesh_memory::retrieval::{RetrievalConfig, RetrievalMode, Retriever, SearchRequest};
use mesh_memory::store::{Amendment, SubjectUpdate, Topology};
use mesh_memory::{ConversationId, EntryId};
use sqlx::PgPool;

/// Words of the fixture: a few frequent, most rare, so idf and length normalisation both matter.
/// Plain English words that PostgreSQL's English configuration keeps as they are (no stop words),
/// though the comparison below does not depend on it (both sides rank PostgreSQL's lexemes).
const WORDS: &[&str] = &[
    "garden", "river", "violin", "kitchen", "mountain", "pottery", "marathon", "lantern", "harbor", "orchard", "tango",
    "canyon", "puzzle", "meadow", "glacier", "saffron", "falcon", "quartz", "velvet", "walnut", "compass", "ember",
    "juniper", "lagoon", "mosaic", "nectar", "pebble", "thistle", "willow", "zephyr",
];

/// A fixture body: 3-29 words, drawn with a skew towards the first words.
fn body(rng: &mut SplitMix) -> String {
    let length = rng.range(3, 30);
    (0..length).map(|_| WORDS[rng.zipf(WORDS.len())]).collect::<Vec<_>>().join(" ")
}

/// The lexemes of `text` as PostgreSQL's English configuration makes them, each repeated as often
/// as it occurs (what BM25 counts).
async fn lexemes(pool: &PgPool, text: &str) -> Vec<String> {
    let rows: Vec<(String, i32)> = sqlx::query_as(
        "SELECT u.lexeme, greatest(cardinality(u.positions), 1)
           FROM unnest(to_tsvector('english', $1)) AS u ORDER BY u.lexeme",
    )
    .bind(text)
    .fetch_all(pool)
    .await
    .unwrap();
    rows.into_iter().flat_map(|(lexeme, n)| std::iter::repeat_n(lexeme, n as usize)).collect()
}

/// Lexical-only retrieval whose order is the lexical rank alone (no boosts), with the reference's
/// BM25 parameters (k1 1.2, b 0.75; production defaults to b 0.5).
fn lexical_only(store: &mesh_memory::store::Store) -> Retriever {
    let config = RetrievalConfig {
        bm25_k1: 1.2,
        bm25_b: 0.75,
        subject_weight: 0.0,
        conversation_weight: 0.0,
        recency_weight: 0.0,
        ..RetrievalConfig::default()
    };
    Retriever::new(store.clone(), config)
}

async fn top_entries(world: &World, retriever: &Retriever, conversation: ConversationId, query: &str) -> Vec<EntryId> {
    let mut request = SearchRequest::new(world.agent, conversation, None, query, RetrievalMode::Recall);
    request.max_count = 10;
    request.token_budget = mesh_memory::retrieval::MAX_TOKEN_BUDGET;
    let outcome = retriever.search(&request).await.unwrap();
    outcome.selections.iter().map(|s| s.entry_id).collect()
}

#[tokio::test]
async fn in_database_bm25_ranks_like_the_reference_on_a_fixture() {
    let db = test_db().await;
    let mut world = World::new(&db.store, "bm25-fixture").await;
    let ann = world.person("Ann", "U-ANN").await;
    let room = world.conversation("C-FIXTURE", Topology::Group, &[&ann]).await;
    let mut rng = SplitMix::new(20261205);
    let mut documents = Vec::new();
    let mut entry_of: HashMap<String, EntryId> = HashMap::new();
    for i in 0..60 {
        let text = body(&mut rng);
        let (entry, _) = world.remember(room, &ann, Some(ann.actor), &text).await;
        let id = format!("doc{i}");
        entry_of.insert(id.clone(), entry);
        documents.push((id, lexemes(&db.pool, &text).await));
    }
    // Another agent's memories, full of the same words, must not move this agent's ranking.
    let mut other = World::new(&db.store, "bm25-other-agent").await;
    let bob = other.person("Bob", "U-BOB").await;
    let elsewhere = other.conversation("C-OTHER", Topology::Group, &[&bob]).await;
    for _ in 0..40 {
        other.remember(elsewhere, &bob, Some(bob.actor), "walnut velvet quartz falcon saffron glacier").await;
    }
    let reference = Bm25Index::from_tokens(documents);
    let retriever = lexical_only(&db.store);
    let (mut compared, mut untied) = (0, 0);
    for query in ["garden violin", "walnut", "velvet quartz quartz", "meadow tango falcon", "river kitchen saffron"] {
        let terms = lexemes(&db.pool, query).await;
        // One more than compared: a tie between the 10th and the 11th makes either a valid 10th.
        let mut expected = reference.search_terms(&terms, 11);
        let tied = expected.windows(2).any(|w| (w[0].1 - w[1].1).abs() < 1e-12);
        expected.truncate(10);
        let actual = top_entries(&world, &retriever, room, query).await;
        assert_eq!(actual.len(), expected.len(), "{query}: as many matches as the reference finds");
        // Same scores in the same order (documents with equal scores may trade places)...
        let id_of: HashMap<EntryId, &String> = entry_of.iter().map(|(id, entry)| (*entry, id)).collect();
        let actual_scores: Vec<f64> = actual.iter().map(|e| reference.score(id_of[e], &terms)).collect();
        for (position, ((_, expected_score), actual_score)) in expected.iter().zip(&actual_scores).enumerate() {
            assert!(
                (expected_score - actual_score).abs() < 1e-9,
                "{query}: rank {} scores {actual_score} in the database ranking, {expected_score} in the reference",
                position + 1
            );
        }
        // ...and, where no two scores tie, the very same documents in the same order.
        if !tied {
            let expected_entries: Vec<EntryId> = expected.iter().map(|(id, _)| entry_of[id]).collect();
            assert_eq!(actual, expected_entries, "{query}: the reference's top 10");
            untied += 1;
        }
        compared += 1;
    }
    assert_eq!(compared, 5);
    assert!(untied >= 3, "the fixture must leave some rankings without ties to compare exactly ({untied})");
    assert_lexical_statistics_match_projection(&db.pool).await;
}

#[tokio::test]
async fn statistics_follow_create_amend_and_forget() {
    let db = test_db().await;
    let mut world = World::new(&db.store, "bm25-writes").await;
    let ann = world.person("Ann", "U-ANN").await;
    let room = world.conversation("C-WRITES", Topology::Group, &[&ann]).await;
    let (first, first_revision) =
        world.remember(room, &ann, Some(ann.actor), "Plays the violin in the river orchestra.").await;
    let (second, _) = world.remember(room, &ann, Some(ann.actor), "Grows saffron in a rooftop garden.").await;
    assert_projection_matches_canonical(&db.pool).await;

    let message = world.say(room, &ann, "Actually it is the cello, and the harbor orchestra.").await;
    db.store
        .amend_entry(Amendment {
            agent: world.agent,
            entry: first,
            expected_revision: first_revision,
            body: Some("Plays the cello in the harbor orchestra.".into()),
            subject: SubjectUpdate::Keep,
            source_actor: Some(ann.actor),
            sources: vec![mesh_memory::store::SourceRef::Message(message)],
        })
        .await
        .unwrap();
    assert_projection_matches_canonical(&db.pool).await;
    let violin: i64 = sqlx::query_scalar(
        "SELECT coalesce(sum(documents), 0)::bigint FROM lexical_term_totals
          WHERE runtime_agent_id = $1 AND lexeme = 'violin'",
    )
    .bind(world.agent)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(violin, 0, "the amended-away word no longer counts");

    // Folding the pending changes into the totals changes no figure.
    mesh_memory::store::fold_lexical_statistics(&db.pool).await.unwrap();
    let pending: i64 =
        sqlx::query_scalar("SELECT count(*) FROM lexical_statistics_pending").fetch_one(&db.pool).await.unwrap();
    assert_eq!(pending, 0, "a fold takes every pending change");
    assert_projection_matches_canonical(&db.pool).await;

    db.store.forget_entry(world.agent, second).await.unwrap();
    assert_projection_matches_canonical(&db.pool).await;
    let (documents, lexemes): (i64, i64) =
        sqlx::query_as("SELECT documents, lexemes FROM lexical_corpus_totals WHERE runtime_agent_id = $1")
            .bind(world.agent)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!((documents, lexemes), (1, 4), "one live memory left: play, cello, harbor, orchestra");
}

/// The store folds the pending changes itself, off the writers' transactions, once per 64
/// committed writes of its process: a burst of remembers leaves the pending layer short again
/// without anyone calling the fold, and the figures equal a recomputation throughout.
#[tokio::test]
async fn the_store_folds_pending_statistics_off_the_writers_path() {
    let db = test_db().await;
    let mut world = World::new(&db.store, "bm25-folding").await;
    let ann = world.person("Ann", "U1").await;
    let channel = world.conversation("C-FOLD", Topology::Channel, &[&ann]).await;
    let mut rng = SplitMix::new(11);
    for _ in 0..mesh_memory::store::maintenance::FOLD_EVERY + 6 {
        world.remember(channel, &ann, Some(ann.actor), &body(&mut rng)).await;
    }
    assert_lexical_statistics_match_projection(&db.pool).await;
    let mut pending = i64::MAX;
    for _ in 0..100 {
        pending =
            sqlx::query_scalar("SELECT count(*) FROM lexical_statistics_pending").fetch_one(&db.pool).await.unwrap();
        if pending < 64 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(pending < 64, "the 64th write started a fold that took the pending rows; {pending} are left");
    let folded: i64 = sqlx::query_scalar("SELECT coalesce(sum(documents), 0)::bigint FROM lexical_corpus_statistics")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert!(folded >= 64, "the fold moved at least the first 64 writes into the totals: {folded}");
    assert_lexical_statistics_match_projection(&db.pool).await;

    // The runtime's role runs the fold (it only moves counts between the layers) but cannot
    // write the statistics itself.
    let (_role, runtime) = common::login_role(&db, "mm_fold_runtime", "mesh_runtime").await;
    world.remember(channel, &ann, Some(ann.actor), "Tends the walnut orchard.").await;
    mesh_memory::store::fold_lexical_statistics(&runtime).await.expect("the runtime may fold");
    let pending: i64 =
        sqlx::query_scalar("SELECT count(*) FROM lexical_statistics_pending").fetch_one(&db.pool).await.unwrap();
    assert_eq!(pending, 0);
    let forged = sqlx::query("UPDATE lexical_term_statistics SET documents = documents + 1")
        .execute(&runtime)
        .await
        .unwrap_err();
    assert_eq!(forged.as_database_error().unwrap().code().as_deref(), Some("42501"), "permission denied");
    assert_lexical_statistics_match_projection(&db.pool).await;
}

/// Pages waiting in the pending list of the projection's full-text index (`pgstattuple`).
async fn text_pending_pages(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT pending_pages::bigint FROM pgstatginindex('searchable_revisions_text_audience')")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The store merges the full-text indexes' pending lists itself, off the writers' transactions,
/// once per `MERGE_EVERY` committed writes of its process (migration 20261210100000): the writes
/// before that leave entries pending, the write that completes the round gets them merged without
/// anyone asking, and searches find the same memories either way. Only the runtime role (and the
/// schema owner) may call the merge.
#[tokio::test]
async fn the_store_merges_full_text_pending_lists_off_the_writers_path() {
    let db = test_db().await;
    sqlx::query("CREATE EXTENSION IF NOT EXISTS pgstattuple").execute(&db.pool).await.unwrap();
    let mut world = World::new(&db.store, "gin-merging").await;
    let ann = world.person("Ann", "U1").await;
    let channel = world.conversation("C-MERGE", Topology::Channel, &[&ann]).await;
    let mut rng = SplitMix::new(12);
    let (walnut, _) = world.remember(channel, &ann, Some(ann.actor), "Tends the walnut orchard.").await;
    for _ in 1..mesh_memory::store::maintenance::MERGE_EVERY - 1 {
        world.remember(channel, &ann, Some(ann.actor), &body(&mut rng)).await;
    }
    let retriever = lexical_only(&db.store);
    assert_eq!(top_entries(&world, &retriever, channel, "walnut orchard").await.first(), Some(&walnut));
    assert!(text_pending_pages(&db.pool).await > 0, "writes before the round leave their index entries pending");

    world.remember(channel, &ann, Some(ann.actor), &body(&mut rng)).await;
    let mut pending = i64::MAX;
    for _ in 0..200 {
        pending = text_pending_pages(&db.pool).await;
        if pending == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(pending, 0, "the write that completed the round got the pending list merged");
    assert_eq!(top_entries(&world, &retriever, channel, "walnut orchard").await.first(), Some(&walnut));

    // Only the tables' owner can merge (`gin_clean_pending_list` wants the index's owner, and no
    // least-privilege definer may own it): a runtime login merges nothing and the list waits for
    // the owner, a writer that finds it full, or autovacuum (migration 20261219100000).
    let (_role, runtime) = common::login_role(&db, "mm_merge_runtime", "mesh_runtime").await;
    world.remember(channel, &ann, Some(ann.actor), "Rows on the harbor at dawn.").await;
    let merged = mesh_memory::store::merge_text_pending_lists(&runtime, true).await.expect("the runtime may call it");
    assert_eq!(merged, 0, "a role that does not own the tables merges nothing");
    assert!(text_pending_pages(&db.pool).await > 0, "the last write's entries stay pending");
    let merged = mesh_memory::store::merge_text_pending_lists(&db.pool, true).await.expect("the owner merges");
    assert!(merged > 0, "the last write's entries were pending and are merged now");
    assert_eq!(text_pending_pages(&db.pool).await, 0);
    let (_other, stranger) = common::login_role(&db, "mm_merge_stranger", "pg_read_all_data").await;
    let refused = mesh_memory::store::merge_text_pending_lists(&stranger, true).await.unwrap_err();
    assert!(refused.to_string().contains("permission denied"), "{refused}");
}

#[tokio::test]
async fn statistics_follow_a_bulk_load() {
    let db = test_db().await;
    let workspace = synthetic::build(&db.pool, SyntheticSpec { revisions: 3_000, seed: 7, vectors: false }, |_| {})
        .await
        .expect("bulk load");
    assert!(workspace.revisions >= 3_000);
    let documents: i64 = sqlx::query_scalar(
        "SELECT coalesce(sum(documents), 0)::bigint FROM lexical_corpus_totals WHERE runtime_agent_id = $1",
    )
    .bind(workspace.agent)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert!(documents > 2_000, "the COPY-loaded projection is counted: {documents}");
    assert_lexical_statistics_match_projection(&db.pool).await;
}

#[tokio::test]
async fn query_weights_read_only_the_asking_agents_statistics() {
    let db = test_db().await;
    let mut one = World::new(&db.store, "bm25-agent-one").await;
    let ann = one.person("Ann", "U-ANN").await;
    let room = one.conversation("C-ONE", Topology::Group, &[&ann]).await;
    one.remember(room, &ann, Some(ann.actor), "Collects quartz and walnut carvings.").await;
    one.remember(room, &ann, Some(ann.actor), "Walks the canyon trail at dawn.").await;
    let weights = |agent: mesh_memory::AgentId| {
        let pool = db.pool.clone();
        async move {
            sqlx::query_as::<_, (Vec<String>, Vec<f64>, f64)>(
                "SELECT lexemes, weights, mean_length FROM memory_bm25_query_weights($1, 'quartz canyon')",
            )
            .bind(agent)
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    let before = weights(one.agent).await;
    let mut two = World::new(&db.store, "bm25-agent-two").await;
    let bob = two.person("Bob", "U-BOB").await;
    let theirs = two.conversation("C-TWO", Topology::Group, &[&bob]).await;
    for _ in 0..25 {
        two.remember(theirs, &bob, Some(bob.actor), "quartz quartz canyon quartz").await;
    }
    assert_eq!(weights(one.agent).await, before, "another agent's memories change nothing here");
    let (lexemes, idf, _) = weights(one.agent).await;
    assert_eq!(lexemes, vec!["canyon".to_string(), "quartz".to_string()]);
    let expected_idf = ((2.0f64 - 1.0 + 0.5) / (1.0 + 0.5) + 1.0).ln();
    assert!(idf.iter().all(|w| (w - expected_idf).abs() < 1e-12), "idf over this agent's 2 rows: {idf:?}");
    let (_, theirs_idf, _) = weights(two.agent).await;
    assert!(theirs_idf.iter().all(|w| *w < expected_idf), "the other agent's own corpus makes the words common");
}
