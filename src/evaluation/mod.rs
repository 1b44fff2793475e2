//! Retrieval quality on LoCoMo-format data, against an exact BM25 baseline computed in the same
//! run (`mesh-memory eval locomo PATH`).
//!
//! Mapping: every dialogue turn becomes one memory (the speaker is its subject and source, its
//! session the source conversation, a group of the two speakers); every question with evidence is
//! asked by the other speaker in a separate conversation of both speakers, through the one
//! retrieval service, in recall mode with a count budget of 10. A selection is relevant when its
//! turn is cited as evidence. Every selected revision is re-checked against the eligibility
//! predicate and any violation is counted (the count must be 0).
//!
//! Time: each turn is recorded at its session's `session_N_date_time`, so memories carry the
//! times a real connector would have recorded, and every question is asked a day after the
//! conversation's last turn. *Answer in context* ([`answers`]): for questions of categories 1-4,
//! a second, prompt-mode search under the default allowances, and whether one line of the packed
//! section holds the gold answer.

pub mod answers;
pub mod bm25;
pub mod dataset;
pub mod metrics;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Duration, Utc};
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
    /// with it into the vector index, and queries search that index. `None` marks them
    /// unavailable.
    pub embedder: Option<Arc<dyn crate::semantic::Embedder>>,
    /// Which vector index the semantic and hybrid variants use (pgvector, or Qdrant with a
    /// collection prefix of this run's own).
    pub vector_index: crate::semantic::VectorIndexChoice,
    /// Evaluate at most this many samples.
    pub max_samples: Option<usize>,
    /// More hybrid variants to evaluate beside the production one, each with its own weights,
    /// named `hybrid:<name>` in the report (for tuning: every variant shares one load).
    pub extra_hybrid: Vec<(String, RetrievalConfig)>,
}

/// One sample as loaded: where and when to ask, and which revision is which turn.
struct LoadedSample {
    agent: AgentId,
    ask_in: ConversationId,
    /// A day after the last turn: when every question is asked.
    asked_at: DateTime<Utc>,
    speakers: HashMap<String, ActorId>,
    turn_of: HashMap<RevisionId, String>,
}

/// What one question got from one variant, for `eval locomo --questions-out` (one JSON line
/// each): enough to recompute every metric and to read what a model would have been given. The
/// question's text is not in it (the data set has it, under the same sample and index).
#[derive(Clone, Debug, Serialize)]
pub struct QuestionRecord {
    /// The sample's id.
    pub sample_id: String,
    /// The question's position among the sample's questions with evidence, from 0.
    pub question_index: usize,
    /// LoCoMo category.
    pub category: i64,
    /// The variant that answered.
    pub variant: String,
    /// The evidence turn ids, as the data set lists them.
    pub evidence: Vec<String>,
    /// The turn ids selected by the recall-mode search (count budget 10), in rank order.
    pub selected: Vec<String>,
    /// The packed prompt-mode section under the default allowances, as a model would get it
    /// (`None` for the BM25 baseline, which renders nothing).
    pub section: Option<String>,
    /// Whether one line of `section` holds the gold answer (`None`: not an answerable question
    /// of categories 1-4, or no section).
    pub answer_in_context: Option<bool>,
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
    let fallback_start = Utc::now() - Duration::days(365);
    let said_at =
        |i: usize, turn: &dataset::Turn| turn.said_at.unwrap_or(fallback_start + Duration::minutes(i as i64 + 1));
    let first_said = sample.turns.iter().enumerate().map(|(i, t)| said_at(i, t)).min().unwrap_or(fallback_start);
    let last_said = sample.turns.iter().enumerate().map(|(i, t)| said_at(i, t)).max().unwrap_or(fallback_start);
    // Everyone is a member from a day before the first turn (audiences count from when a
    // message was sent).
    let start = first_said - Duration::days(1);
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
                sent_at: said_at(i, turn),
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
        turn_of.insert(written.revision_id(), turn.dia_id.clone());
    }
    Ok(LoadedSample { agent, ask_in, asked_at: last_said + Duration::days(1), speakers, turn_of })
}

/// Loads the samples, then asks every question through each available variant.
/// `progress(done, total)` is called after each question.
pub async fn run_locomo(
    store: &Store,
    samples: &[dataset::Sample],
    options: &EvalOptions,
    progress: impl FnMut(usize, usize),
) -> Result<EvalReport, EvalError> {
    run_locomo_recorded(store, samples, options, progress, None).await
}

/// [`run_locomo`], also handing every question's [`QuestionRecord`] to `record` (which then gets
/// a prompt section for every question, category 5 included).
pub async fn run_locomo_recorded(
    store: &Store,
    samples: &[dataset::Sample],
    options: &EvalOptions,
    mut progress: impl FnMut(usize, usize),
    mut record: Option<&mut dyn FnMut(QuestionRecord)>,
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
            let backend = crate::semantic::vector_backend(options.vector_index.clone(), embedder.clone())?;
            let mut worker = crate::semantic::IndexWorker::new(
                store.pool().clone(),
                embedder.clone(),
                crate::semantic::WorkerConfig::default(),
            );
            if let Some(mirror) = backend.mirror {
                worker = worker.with_mirror(mirror);
            }
            worker.drain().await?;
            report.index_seconds = Some(timer.elapsed().as_secs_f64());
            Some(backend.index)
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
        for (question_index, question) in sample.questions.iter().enumerate() {
            let asker = loaded.speakers.get(sample.asker(question)).copied();
            let gold = match question.category {
                1..=4 => answers::GoldAnswer::parse(&question.answer),
                _ => None,
            };
            for (variant, retriever) in &variants {
                let timer = Instant::now();
                let millis: f64;
                let mut section = None;
                let ranked: Vec<String> = match retriever {
                    None => {
                        let ranked = bm25.search(&question.question, EVAL_DEPTH);
                        millis = timer.elapsed().as_secs_f64() * 1000.0;
                        ranked
                    }
                    Some(retriever) => {
                        let ask = |mode: RetrievalMode| {
                            let mut request =
                                SearchRequest::new(loaded.agent, loaded.ask_in, asker, &question.question, mode);
                            request.asked_at = Some(loaded.asked_at);
                            request
                        };
                        let mut request = ask(RetrievalMode::Recall);
                        request.max_count = EVAL_DEPTH as u32;
                        request.token_budget = crate::retrieval::MAX_TOKEN_BUDGET;
                        let outcome = retriever.search(&request).await?;
                        millis = timer.elapsed().as_secs_f64() * 1000.0;
                        for category in &outcome.degradation_categories {
                            *report
                                .degraded
                                .entry(variant.clone())
                                .or_default()
                                .entry(category.as_str().to_owned())
                                .or_default() += 1;
                        }
                        let mut used = outcome.used_revisions();
                        let ranked = used.iter().filter_map(|r| loaded.turn_of.get(r).cloned()).collect();
                        if gold.is_some() || record.is_some() {
                            // What automatic context assembly would give the model: default allowances.
                            let prompt = retriever.search(&ask(RetrievalMode::Prompt)).await?;
                            section = Some(prompt.prompt_section());
                            used.extend(prompt.used_revisions());
                        }
                        let verdicts = revision_verdicts(store.pool(), &context, &used).await?;
                        report.eligibility_violations += verdicts.iter().filter(|v| !v.rule.is_eligible()).count();
                        ranked
                    }
                };
                let held = match (&gold, &section) {
                    (Some(gold), Some(section)) => Some(gold.held_by_section(section)),
                    _ => None,
                };
                let overall = report.overall.entry(variant.clone()).or_default();
                overall.add(&ranked, &question.evidence, millis);
                let by_category =
                    report.by_category.entry(variant.clone()).or_default().entry(question.category).or_default();
                by_category.add(&ranked, &question.evidence, millis);
                if let Some(held) = held {
                    overall.add_answer(held);
                    by_category.add_answer(held);
                }
                if let Some(record) = record.as_mut() {
                    record(QuestionRecord {
                        sample_id: sample.id.clone(),
                        question_index,
                        category: question.category,
                        variant: variant.clone(),
                        evidence: question.evidence.clone(),
                        selected: ranked,
                        section,
                        answer_in_context: held,
                    });
                }
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
        "{:<width$} {:>8} {:>6} {:>9} {:>10} {:>9} {:>10} {:>8} {:>7} {:>9} {:>10}\n",
        "variant",
        "category",
        "n",
        "recall@5",
        "recall@10",
        "paper R@5",
        "paper R@10",
        "nDCG@10",
        "MRR",
        "ms/query",
        "answer@ctx"
    ));
    for (variant, categories) in &report.by_category {
        let rows = categories
            .iter()
            .map(|(c, m)| (c.to_string(), m))
            .chain(report.overall.get(variant).map(|m| ("all".to_string(), m)));
        for (category, m) in rows {
            let answer = m.answer_in_context.map_or_else(|| "-".to_owned(), |a| format!("{a:.3}"));
            out.push_str(&format!(
                "{:<width$} {:>8} {:>6} {:>9.3} {:>10.3} {:>9.3} {:>10.3} {:>8.3} {:>7.3} {:>9.2} {:>10}\n",
                variant,
                category,
                m.queries,
                m.recall_at_5,
                m.recall_at_10,
                m.paper_recall_at_5,
                m.paper_recall_at_10,
                m.ndcg_at_10,
                m.mrr,
                m.ms_per_query,
                answer
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
