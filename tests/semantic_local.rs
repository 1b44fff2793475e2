//! The local all-MiniLM-L6-v2 embedder (feature `local-embedder`; Cargo.toml marks this test
//! target `required-features`, so it is built only with the feature):
//!
//!     scripts/setup-embedder.sh
//!     cargo test --features local-embedder --test semantic_local
//!
//! The reference vectors in `tests/semantic_fixtures/minilm_reference.json` come from an
//! independent numpy implementation of BERT (`tests/semantic_fixtures/minilm_reference.py`) over
//! the same weights. A missing model fails loudly: it is never a skip.

mod common;

use std::sync::Arc;

use common::{test_db, World};
use mesh_memory::retrieval::{RetrievalConfig, RetrievalMode, Retriever, SearchRequest};
use mesh_memory::semantic::local::{default_model_dir, LocalMiniLm, LOCAL_DIMENSION, LOCAL_MODEL_ID};
use mesh_memory::semantic::{Embedder, IndexWorker, PgVectorIndex, WorkerConfig};
use mesh_memory::store::Topology;

fn model() -> LocalMiniLm {
    let dir = default_model_dir().unwrap_or_else(|| {
        panic!(
            "\n==== all-MiniLM-L6-v2 is not installed: run scripts/setup-embedder.sh \
             (or set MESH_EMBEDDER_MODEL_DIR) before `cargo test --features local-embedder` ====\n"
        )
    });
    LocalMiniLm::load(&dir).unwrap_or_else(|e| panic!("loading the model from {}: {e}", dir.display()))
}

#[derive(serde::Deserialize)]
struct Reference {
    sentences: Vec<ReferenceSentence>,
}

#[derive(serde::Deserialize)]
struct ReferenceSentence {
    text: String,
    embedding: Vec<f64>,
}

fn reference() -> Reference {
    serde_json::from_str(include_str!("semantic_fixtures/minilm_reference.json")).unwrap()
}

fn max_abs_diff(a: &[f32], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (f64::from(*x) - y).abs()).fold(0.0, f64::max)
}

#[tokio::test]
async fn the_local_embedder_reproduces_reference_vectors_to_1e_4() {
    let model = model();
    assert_eq!(model.info().model, LOCAL_MODEL_ID);
    assert_eq!(model.info().dimension, LOCAL_DIMENSION);
    let reference = reference();
    assert_eq!(reference.sentences.len(), 2);
    let texts: Vec<String> = reference.sentences.iter().map(|s| s.text.clone()).collect();

    // One at a time, and as a batch (padded to the longest member, padding masked out).
    for sentence in &reference.sentences {
        let single = model.embed(std::slice::from_ref(&sentence.text)).await.unwrap();
        let diff = max_abs_diff(&single[0], &sentence.embedding);
        assert!(diff < 1e-4, "{:?}: max difference {diff}", sentence.text);
    }
    let batch = model.embed(&texts).await.unwrap();
    for (vector, sentence) in batch.iter().zip(&reference.sentences) {
        let diff = max_abs_diff(vector, &sentence.embedding);
        assert!(diff < 1e-4, "batched {:?}: max difference {diff}", sentence.text);
        let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
    }
}

#[tokio::test]
async fn long_inputs_are_truncated_at_256_tokens_not_128() {
    let model = model();
    // 300 distinct-ish words: beyond 256 tokens. Changing a word at position ~200 (after the
    // package's fixed 128 but before 256) must change the vector; one at ~290 must not.
    let words: Vec<String> = (0..300).map(|i| format!("word{}", i % 50)).collect();
    let base = words.join(" ");
    let mut early = words.clone();
    early[60] = "elephant".into();
    let mut late = words.clone();
    late[290] = "elephant".into();
    let vectors = model.embed(&[base, early.join(" "), late.join(" ")]).await.unwrap();
    let differs = |a: &[f32], b: &[f32]| a.iter().zip(b).any(|(x, y)| (x - y).abs() > 1e-6);
    assert!(differs(&vectors[0], &vectors[1]), "a token inside the first 256 matters");
    assert!(!differs(&vectors[0], &vectors[2]), "tokens past 256 are truncated");
}

#[tokio::test]
async fn a_paraphrase_finds_the_tabs_preference_with_semantic_on_and_not_with_lexical_alone() {
    let db = test_db().await;
    let mut w = World::new(&db.store, "agent").await;
    let victor = w.person("Victor", "U1").await;
    let ana = w.person("Ana", "U2").await;
    let eng = w.conversation("C-eng", Topology::Channel, &[&victor, &ana]).await;
    // No word of the memory shares a lexeme with the question.
    let (_, tabs) =
        w.remember(eng, &victor, Some(victor.actor), "Our chief technology officer wants tabs, never spaces.").await;
    let (_, sushi) = w.remember(eng, &ana, Some(ana.actor), "Ana's favourite food is sushi.").await;
    w.remember(eng, &ana, None, "The deploy train leaves every Friday afternoon.").await;
    w.remember(eng, &ana, None, "The office plants get watered on Mondays.").await;

    let embedder: Arc<dyn Embedder> = Arc::new(model());
    let report = IndexWorker::new(db.pool.clone(), embedder.clone(), WorkerConfig::default()).drain().await.unwrap();
    assert_eq!(report.embedded, 4);

    let question = "which indentation style does the CTO like?";
    // Asked without a current speaker, so no subject boost helps or hurts any memory.
    let request = SearchRequest::new(w.agent, eng, None, question, RetrievalMode::Recall);

    let lexical_only = Retriever::new(db.store.clone(), RetrievalConfig::default());
    let without = lexical_only.search(&request).await.unwrap();
    assert!(!without.used_revisions().contains(&tabs), "lexical alone cannot find the paraphrase");

    let hybrid = Retriever::new(db.store.clone(), RetrievalConfig::default())
        .with_semantic_index(Arc::new(PgVectorIndex::new(embedder)));
    let with = hybrid.search(&request).await.unwrap();
    assert!(with.degradation_categories.is_empty(), "{:?}", with.degradation_categories);
    let first = with.selections.first().expect("semantic search selects something");
    assert_eq!(first.revision_id, tabs, "the tabs preference ranks first: {:?}", with.selections);
    let semantic = first.components.semantic.expect("a semantic rank in the components");
    assert_eq!(semantic.rank, 1);
    assert_eq!(with.used_revisions(), vec![tabs], "unrelated memories stay below the similarity floor");

    // And the other way round: a food question selects the food memory, not the tabs one.
    let lunch = SearchRequest::new(w.agent, eng, None, "what should I eat for lunch?", RetrievalMode::Recall);
    let food = hybrid.search(&lunch).await.unwrap();
    assert_eq!(food.used_revisions(), vec![sushi], "{:?}", food.selections);
}

/// With a model tokenizer configured (here the model package's own `tokenizer.json`, as
/// `MESH_PROMPT_TOKENIZER` would name it), packing counts its real tokens of the same
/// representations, the allowance holds several times more one-line memories than under the byte
/// bound (the targets: at least 20 typical one-line memories in the default 4096 by bytes,
/// at least 60 by tokens), and the audit row says which bound was used.
#[tokio::test]
async fn a_configured_tokenizer_counts_real_tokens_and_the_event_records_it() {
    use mesh_memory::retrieval::tokens::{CostBound, ModelTokenizer};
    use mesh_memory::service::{configured_retriever, RetrieverSetup, TokenCounting};

    let db = test_db().await;
    let mut world = World::new(&db.store, "assistant").await;
    let victor = world.person("Victor", "U123").await;
    let eng = world.conversation("C-ENG", Topology::Channel, &[&victor]).await;
    for _ in 0..80 {
        world.remember(eng, &victor, Some(victor.actor), "Insists on tabs over spaces.").await;
    }
    let dir = default_model_dir().expect("the model is installed (see model())");
    let tokenizer = Arc::new(ModelTokenizer::from_file(&dir.join("tokenizer.json")).unwrap());
    let counted = |tokens: TokenCounting| {
        let mut setup = RetrieverSetup::explicit(RetrievalConfig::default(), None);
        setup.tokens = tokens;
        configured_retriever(&db.store, setup).unwrap().retriever
    };
    let request = SearchRequest {
        max_count: 100,
        ..SearchRequest::new(world.agent, eng, Some(victor.actor), "", RetrievalMode::Prompt)
    };
    let by_bytes = counted(TokenCounting::Bytes).search(&request).await.unwrap();
    let by_tokens = counted(TokenCounting::Counter(tokenizer)).search(&request).await.unwrap();
    assert_eq!((by_bytes.cost_bound, by_tokens.cost_bound), (CostBound::Bytes, CostBound::Tokenizer));
    let per_entry = |o: &mesh_memory::retrieval::SearchOutcome| o.cost_tokens / o.selections.len() as u32;
    println!(
        "one-line memories in 4096: {} by bytes ({} each), {} by tokens ({} each)",
        by_bytes.selections.len(),
        per_entry(&by_bytes),
        by_tokens.selections.len(),
        per_entry(&by_tokens)
    );
    assert!(per_entry(&by_tokens) < per_entry(&by_bytes), "real tokens are fewer than bytes");
    // With the day it was told (issue 33: 138 and 59 before the day; at most 160 and 70).
    assert!(per_entry(&by_bytes) <= 160, "a dated one-line memory costs at most 160 bytes");
    assert!(per_entry(&by_tokens) <= 70, "a dated one-line memory costs at most 70 MiniLM tokens");
    assert!(by_bytes.selections.len() >= 20, "at least 20 one-line memories fit 4096 bytes");
    assert!(by_tokens.selections.len() >= 60, "at least 60 one-line memories fit 4096 tokens");
    assert!(by_tokens.cost_tokens <= 4096);
    let stored: String = sqlx::query_scalar("SELECT cost_bound FROM memory_retrieval_events WHERE id = $1")
        .bind(by_tokens.event_id)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(stored, "tokenizer");
}
