//! Retrieval quality on LoCoMo-format data, against an exact BM25 baseline computed in the same
//! run (`mesh-memory eval locomo PATH`).
//!
//! Mapping: every dialogue turn becomes one memory (the speaker is its subject and source, its
//! session the source conversation, a group of the two speakers); every question with evidence is
//! asked by the other speaker in a separate conversation of both speakers, through the one
//! retrieval service, in recall mode with a count budget of 10. A selection is relevant when its
//! turn is cited as evidence. Every selected revision is re-checked against the eligibility
//! predicate and any violation is counted (the count must be 0).

pub mod bm25;
pub mod dataset;
pub mod metrics;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use chrono::{Duration, Utc};
use serde::Serialize;

use crate::ids::{ActorId, AgentId, ConversationId, RevisionId};
use crate::privacy::{revision_verdicts, EligibilityContext};
use crate::retrieval::SemanticIndex;
use crate::retrieval::{RetrievalConfig, RetrievalMode, Retriever, SearchRequest};
use crate::service::RetrieverSetup;
use crate::store::{
    ActorKind, Direction, NewConversation, NewMemory, NewMessage, Restriction, SourceRef, Store, Topology,
};
use metrics::MetricTotals;

/// Results per retrieval variant are cut at this rank.
pub const EVAL_DEPTH: usize = 10;

/// Why an evaluation stopped.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// The data could not be read.
    #[error(transparent)]
    Locomo(#[from] dataset::LocomoError),
    /// Loading the memories failed.
    #[error("loading memories: {0}")]
    Store(#[from] crate::store::StoreError),
    /// A search failed.
    #[error("retrieval: {0}")]
    Retrieval(#[from] crate::retrieval::RetrievalError),
    /// The eligibility re-check failed.
    #[error("eligibility re-check: {0}")]
    Privacy(#[from] crate::privacy::PrivacyError),
    /// Embedding the memories failed.
    #[error("semantic index: {0}")]
    Semantic(#[from] crate::semantic::SemanticError),
    /// A variant's retrieval settings were refused.
    #[error("retrieval settings: {0}")]
    Setup(#[from] crate::service::SetupError),
}

/// One retrieval variant under evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// Full-text candidates only (no vector index).
    Lexical,
    /// Vector candidates only.
    Semantic,
    /// The production configuration: lexical and semantic fused.
    Hybrid,
    /// Exact Okapi BM25 over the same memories (the baseline).
    Bm25,
}

impl Variant {
    /// Name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Lexical => "lexical",
            Variant::Semantic => "semantic",
            Variant::Hybrid => "hybrid",
            Variant::Bm25 => "bm25",
        }
    }
}

/// The whole report: per variant, overall and per LoCoMo category.
#[derive(Clone, Debug, Default, Serialize)]
pub struct EvalReport {
    /// Samples loaded.
    pub samples: usize,
    /// Memories loaded.
    pub memories: usize,
    /// Questions asked (per variant).
    pub questions: usize,
    /// Variant -> overall metrics.
    pub overall: BTreeMap<String, MetricTotals>,
    /// Variant -> category -> metrics.
    pub by_category: BTreeMap<String, BTreeMap<i64, MetricTotals>>,
    /// Selected revisions that the eligibility predicate rejects (must be 0).
    pub eligibility_violations: usize,
    /// Variants that could not run, with why (e.g. no vector index).
    pub unavailable: BTreeMap<String, String>,
    /// Variant -> degradation category -> searches that reported it (a semantic search that
    /// timed out or was unavailable is scored as the lexical search it fell back to; this says
    /// how often that happened).
    pub degraded: BTreeMap<String, BTreeMap<String, usize>>,
    /// Seconds spent loading memories.
    pub load_seconds: f64,
    /// Seconds spent embedding and indexing them, when semantic variants ran.
    pub index_seconds: Option<f64>,
}

/// What the runner needs besides the data.
pub struct EvalOptions {
    /// Retrieval weights (shared by every variant).
    pub config: RetrievalConfig,
    /// The embedder for the semantic and hybrid variants: after loading, the outbox is drained
    /// with it into pgvector, and queries search that index. `None` marks them unavailable.
    pub embedder: Option<Arc<dyn crate::semantic::Embedder>>,
    /// Evaluate at most this many samples.
    pub max_samples: Option<usize>,
    /// More hybrid variants to evaluate beside the production one, each with its own weights,
    /// named `hybrid:<name>` in the report (for tuning: every variant shares one load).
    pub extra_hybrid: Vec<(String, RetrievalConfig)>,
}

/// One sample as loaded: where to ask, and which revision is which turn.
struct LoadedSample {
    agent: AgentId,
    ask_in: ConversationId,
    speakers: HashMap<String, ActorId>,
    turn_of: HashMap<RevisionId, String>,
}

async fn load_sample(store: &Store, sample: &dataset::Sample, run: &str) -> Result<LoadedSample, EvalError> {
    let agent = store.create_runtime_agent(&format!("locomo-{}-{run}", sample.id)).await?;
    let agent_actor = store.agent_actor(agent).await?;
    let mut speakers = HashMap::new();
    let mut identities = HashMap::new();
    for name in &sample.speakers {
        let actor = store.create_actor(ActorKind::Human, name).await?;
        let identity = store.add_connector_identity(actor, "locomo", &format!("{}:{name}:{run}", sample.id)).await?;
        speakers.insert(name.clone(), actor);
        identities.insert(name.clone(), identity);
    }
    let start = Utc::now() - Duration::days(365);
    let conversation = |channel: String| {
        let members: Vec<ActorId> = speakers.values().copied().collect();
        async move {
            let id = store
                .create_conversation(NewConversation {
                    agent,
                    connector: "locomo",
                    external_channel_id: &channel,
                    topology: Topology::Group,
                    title: &channel,
                })
                .await?;
            store.join_conversation(id, agent_actor, start).await?;
            for member in members {
                store.join_conversation(id, member, start).await?;
            }
            Ok::<_, EvalError>(id)
        }
    };
    let ask_in = conversation(format!("{}-questions", sample.id)).await?;
    let mut sessions: HashMap<u32, ConversationId> = HashMap::new();
    let mut turn_of = HashMap::new();
    for (i, turn) in sample.turns.iter().enumerate() {
        let Some(&speaker) = speakers.get(&turn.speaker) else { continue };
        let session = match sessions.get(&turn.session) {
            Some(id) => *id,
            None => {
                let id = conversation(format!("{}-session-{}", sample.id, turn.session)).await?;
                sessions.insert(turn.session, id);
                id
            }
        };
        let message = store
            .record_message(NewMessage {
                agent,
                conversation: session,
                direction: Direction::Inbound,
                sender: speaker,
                sender_identity: identities.get(&turn.speaker).copied(),
                body: &turn.text,
                sent_at: start + Duration::minutes(i as i64 + 1),
            })
            .await?;
        let body: String = turn.text.chars().take(crate::store::MAX_BODY_CHARS).collect();
        let written = store
            .create_entry(NewMemory {
                agent,
                body,
                subject: Some(speaker),
                source_actor: Some(speaker),
                origin_conversation: Some(session),
                always_on: false,
                restriction: Restriction::None,
                sources: vec![SourceRef::Message(message)],
            })
            .await?;
        turn_of.insert(written.revision_id, turn.dia_id.clone());
    }
    Ok(LoadedSample { agent, ask_in, speakers, turn_of })
}

/// Loads the samples, then asks every question through each available variant.
/// `progress(done, total)` is called after each question.
pub async fn run_locomo(
    store: &Store,
    samples: &[dataset::Sample],
    options: &EvalOptions,
    mut progress: impl FnMut(usize, usize),
) -> Result<EvalReport, EvalError> {
    let samples = &samples[..options.max_samples.unwrap_or(samples.len()).min(samples.len())];
    let run = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
    let mut report = EvalReport { samples: samples.len(), ..EvalReport::default() };
    let started = Instant::now();
    let mut loaded = Vec::new();
    for sample in samples {
        loaded.push(load_sample(store, sample, &run).await?);
    }
    report.load_seconds = started.elapsed().as_secs_f64();
    report.memories = loaded.iter().map(|l| l.turn_of.len()).sum();

    let configured = |config: RetrievalConfig, index: Option<Arc<dyn SemanticIndex>>| {
        crate::service::configured_retriever(store, RetrieverSetup::explicit(config, index)).map(|c| c.retriever)
    };
    let lexical = configured(options.config.clone(), None)?;
    let mut variants: Vec<(String, Option<Retriever>)> =
        vec![(Variant::Lexical.name().into(), Some(lexical)), (Variant::Bm25.name().into(), None)];
    let semantic_index: Option<Arc<dyn SemanticIndex>> = match &options.embedder {
        Some(embedder) => {
            let timer = Instant::now();
            let worker = crate::semantic::IndexWorker::new(
                store.pool().clone(),
                embedder.clone(),
                crate::semantic::WorkerConfig::default(),
            );
            worker.drain().await?;
            report.index_seconds = Some(timer.elapsed().as_secs_f64());
            Some(Arc::new(crate::semantic::PgVectorIndex::new(embedder.clone())))
        }
        None => None,
    };
    match &semantic_index {
        Some(index) => {
            let with_index = |config: RetrievalConfig| configured(config, Some(index.clone())).map(Some);
            let semantic_only = RetrievalConfig { lexical_enabled: false, ..options.config.clone() };
            variants.push((Variant::Semantic.name().into(), with_index(semantic_only)?));
            variants.push((Variant::Hybrid.name().into(), with_index(options.config.clone())?));
            for (name, config) in &options.extra_hybrid {
                variants.push((format!("hybrid:{name}"), with_index(config.clone())?));
            }
        }
        None => {
            for v in [Variant::Semantic, Variant::Hybrid] {
                report.unavailable.insert(v.name().into(), "no vector index configured".into());
            }
        }
    }

    let total: usize = samples.iter().map(|s| s.questions.len()).sum::<usize>() * variants.len();
    let mut done = 0;
    for (sample, loaded) in samples.iter().zip(&loaded) {
        let bm25 = bm25::Bm25Index::new(sample.turns.iter().map(|t| (t.dia_id.as_str(), t.text.as_str())));
        let context = EligibilityContext::resolve(store, loaded.agent, loaded.ask_in).await?;
        for question in &sample.questions {
            let asker = loaded.speakers.get(sample.asker(question)).copied();
            for (variant, retriever) in &variants {
                let timer = Instant::now();
                let ranked: Vec<String> = match retriever {
                    None => bm25.search(&question.question, EVAL_DEPTH),
                    Some(retriever) => {
                        let mut request = SearchRequest::new(
                            loaded.agent,
                            loaded.ask_in,
                            asker,
                            &question.question,
                            RetrievalMode::Recall,
                        );
                        request.max_count = EVAL_DEPTH as u32;
                        request.token_budget = crate::retrieval::MAX_TOKEN_BUDGET;
                        let outcome = retriever.search(&request).await?;
                        for category in &outcome.degradation_categories {
                            *report
                                .degraded
                                .entry(variant.clone())
                                .or_default()
                                .entry(category.as_str().to_owned())
                                .or_default() += 1;
                        }
                        let used = outcome.used_revisions();
                        let verdicts = revision_verdicts(store.pool(), &context, &used).await?;
                        report.eligibility_violations += verdicts.iter().filter(|v| !v.rule.is_eligible()).count();
                        used.iter().filter_map(|r| loaded.turn_of.get(r).cloned()).collect()
                    }
                };
                let millis = timer.elapsed().as_secs_f64() * 1000.0;
                report.overall.entry(variant.clone()).or_default().add(&ranked, &question.evidence, millis);
                report.by_category.entry(variant.clone()).or_default().entry(question.category).or_default().add(
                    &ranked,
                    &question.evidence,
                    millis,
                );
                done += 1;
                progress(done, total);
            }
            report.questions += 1;
        }
    }
    Ok(report)
}

/// The report as a fixed-width table (one row per variant and category, then overall).
pub fn render_table(report: &EvalReport) -> String {
    let mut out = format!(
        "LoCoMo: {} samples, {} memories, {} questions; eligibility violations: {}\n",
        report.samples, report.memories, report.questions, report.eligibility_violations
    );
    let width = report.by_category.keys().map(String::len).max().unwrap_or(7).max(7);
    out.push_str(&format!(
        "{:<width$} {:>8} {:>6} {:>9} {:>10} {:>9} {:>10} {:>8} {:>7} {:>9}\n",
        "variant", "category", "n", "recall@5", "recall@10", "paper R@5", "paper R@10", "nDCG@10", "MRR", "ms/query"
    ));
    for (variant, categories) in &report.by_category {
        let rows = categories
            .iter()
            .map(|(c, m)| (c.to_string(), m))
            .chain(report.overall.get(variant).map(|m| ("all".to_string(), m)));
        for (category, m) in rows {
            out.push_str(&format!(
                "{:<width$} {:>8} {:>6} {:>9.3} {:>10.3} {:>9.3} {:>10.3} {:>8.3} {:>7.3} {:>9.2}\n",
                variant,
                category,
                m.queries,
                m.recall_at_5,
                m.recall_at_10,
                m.paper_recall_at_5,
                m.paper_recall_at_10,
                m.ndcg_at_10,
                m.mrr,
                m.ms_per_query
            ));
        }
    }
    for (variant, m) in &report.overall {
        let degraded = report.degraded.get(variant);
        let described = match degraded {
            None => "none".to_owned(),
            Some(counts) => counts.iter().map(|(c, n)| format!("{c} {n}")).collect::<Vec<_>>().join(", "),
        };
        out.push_str(&format!("{variant:<width$} degraded searches: {described} (of {})\n", m.queries));
    }
    for (variant, why) in &report.unavailable {
        out.push_str(&format!("{variant:<9} unavailable: {why}\n"));
    }
    out
}
