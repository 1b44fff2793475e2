//! Synthetic workspaces for the speed benchmark, bulk-loaded with `COPY` so that a million
//! revisions load in minutes, not hours. The shape is realistic for an agent runtime: many direct
//! conversations, fewer groups, a few large channels, a sliver of legacy conversations whose
//! audience is unknown, some amended and some forgotten memories.

use std::collections::HashMap;

use chrono::{Duration, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use super::hashing::{hash_vector, HashingEmbedder};
use crate::ids::{ActorId, AgentId, ConversationId};

/// A small, fast, seedable PRNG (SplitMix64): benchmarks must be reproducible, and the crate does
/// not need a `rand` dependency for this.
#[derive(Clone, Debug)]
pub struct SplitMix(u64);

impl SplitMix {
    /// Seeds the generator.
    pub fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[low, high)`.
    pub fn range(&mut self, low: usize, high: usize) -> usize {
        low + (self.unit() * (high - low) as f64) as usize
    }

    /// A Zipf-like (log-uniform) index in `[0, n)`: a few words are very common, most are rare.
    pub fn zipf(&mut self, n: usize) -> usize {
        (((n as f64 + 1.0).ln() * self.unit()).exp() as usize).saturating_sub(1).min(n - 1)
    }
}

/// How big and how shaped a synthetic workspace is.
#[derive(Clone, Copy, Debug)]
pub struct SyntheticSpec {
    /// Total memory revisions.
    pub revisions: usize,
    /// Seed for reproducibility.
    pub seed: u64,
    /// Embed the current revisions of live entries while loading (the hashing embedder, into an
    /// active generation), for hybrid search.
    pub vectors: bool,
}

impl SyntheticSpec {
    fn actors(&self) -> usize {
        (self.revisions / 200).max(50)
    }

    fn conversations(&self) -> usize {
        (self.revisions / 500).max(24)
    }
}

/// A conversation of the synthetic workspace.
#[derive(Clone, Debug)]
pub struct SyntheticConversation {
    /// Its id.
    pub id: ConversationId,
    /// Its topology name (`direct`, `group`, `channel`, `unknown`).
    pub topology: &'static str,
    /// Its members (not the agent).
    pub members: Vec<ActorId>,
}

/// What was loaded, for generating queries against it.
#[derive(Clone, Debug)]
pub struct SyntheticWorkspace {
    /// The runtime agent.
    pub agent: AgentId,
    /// Every conversation with its members.
    pub conversations: Vec<SyntheticConversation>,
    /// The vocabulary bodies were drawn from (Zipf order: common first).
    pub vocabulary: Vec<String>,
    /// Revisions loaded.
    pub revisions: usize,
    /// Entries loaded.
    pub entries: usize,
}

/// Words in the synthetic vocabulary (bodies and queries draw from it).
const VOCABULARY_SIZE: usize = 20_000;

/// A pronounceable vocabulary: a few real workplace words first (so they are common), then
/// generated words.
pub fn vocabulary(size: usize) -> Vec<String> {
    const REAL: &[&str] = &[
        "deploy",
        "review",
        "tabs",
        "spaces",
        "release",
        "meeting",
        "lunch",
        "ramen",
        "oncall",
        "incident",
        "database",
        "migration",
        "roadmap",
        "budget",
        "hiring",
        "vacation",
        "kids",
        "school",
        "coffee",
        "tests",
        "latency",
        "customer",
        "design",
        "frontend",
        "backend",
        "security",
        "privacy",
        "payments",
        "platform",
        "friday",
    ];
    const ONSETS: &[&str] = &["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st", "tr"];
    const VOWELS: &[&str] = &["a", "e", "i", "o", "u", "ai", "ou"];
    let mut words: Vec<String> = REAL.iter().map(|w| w.to_string()).collect();
    let mut i = 0usize;
    while words.len() < size {
        let mut w = String::new();
        let mut n = i;
        for _ in 0..3 {
            w.push_str(ONSETS[n % ONSETS.len()]);
            n /= ONSETS.len();
            w.push_str(VOWELS[n % VOWELS.len()]);
            n /= VOWELS.len();
        }
        words.push(w);
        i += 1;
    }
    words.truncate(size);
    words
}

/// A body of `min..=max` words: one word in ten from a Zipf-like head (so that a few workplace
/// words are common, as in real chat), the rest uniform over the long tail (content words after
/// stop-word removal are spread thin: even the commonest appears in a few percent of memories).
pub fn sentence(rng: &mut SplitMix, vocabulary: &[String], min: usize, max: usize) -> String {
    let n = rng.range(min, max + 1);
    (0..n)
        .map(|_| {
            let index = if rng.unit() < 0.1 { rng.zipf(vocabulary.len()) } else { rng.range(0, vocabulary.len()) };
            vocabulary[index].as_str()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The text-format NULL marker, passed as a field to [`CopyBuffer::row`].
const NULL: &str = "\u{0}NULL";

/// Rows for one COPY, in PostgreSQL text format.
struct CopyBuffer {
    text: String,
}

impl CopyBuffer {
    fn new() -> Self {
        CopyBuffer { text: String::new() }
    }

    fn row(&mut self, fields: &[&str]) {
        for (i, f) in fields.iter().enumerate() {
            if i > 0 {
                self.text.push('\t');
            }
            if *f == NULL {
                self.text.push_str("\\N");
                continue;
            }
            for c in f.chars() {
                match c {
                    '\\' => self.text.push_str("\\\\"),
                    '\t' => self.text.push_str("\\t"),
                    '\n' => self.text.push_str("\\n"),
                    '\r' => self.text.push_str("\\r"),
                    c => self.text.push(c),
                }
            }
        }
        self.text.push('\n');
    }
}

async fn copy(tx: &mut sqlx::PgConnection, statement: &str, text: &str) -> Result<(), sqlx::Error> {
    let mut copy = tx.copy_in_raw(statement).await?;
    for chunk in text.as_bytes().chunks(1 << 20) {
        copy.send(chunk).await?;
    }
    copy.finish().await?;
    Ok(())
}

fn pick_topology(rng: &mut SplitMix) -> (&'static str, usize, usize) {
    let roll = rng.unit();
    if roll < 0.50 {
        ("direct", 1, 2)
    } else if roll < 0.80 {
        ("group", 3, 9)
    } else if roll < 0.98 {
        ("channel", 10, 61)
    } else {
        ("unknown", 2, 6)
    }
}

/// Revisions generated and copied per transaction. The rows of a chunk are held in memory as COPY
/// text (a channel's source carries ~60 member ids), so a 10M store must not be built at once; a
/// chunk is also what the statement triggers refresh in one go.
const CHUNK_REVISIONS: usize = 100_000;

/// Chunks copied at once, each on its own connection: one backend does a chunk's COPY and all
/// its trigger work on one core, so two keep both of the benchmark machine's cores busy.
const COPY_CONNECTIONS: usize = 2;

/// The time between two loaded revisions: 30 seconds, or less where that would run past today
/// (the store spans at most the 400 days before now, whatever its size).
fn revision_spacing(revisions: usize) -> Duration {
    let span_ms = Duration::days(400).num_milliseconds();
    Duration::milliseconds((span_ms / revisions.max(1) as i64).min(30_000))
}

/// Builds a workspace of `spec.revisions` revisions, one transaction per chunk of
/// [`CHUNK_REVISIONS`], then VACUUM ANALYZEs. With `spec.vectors`, each chunk's current revisions
/// of live entries are embedded (hashing embedder) into an active generation *before* their
/// sources are copied, so the projection rows are written once with their embedding bits instead
/// of being rewritten by a later vector load.
pub async fn build(
    pool: &PgPool,
    spec: SyntheticSpec,
    mut progress: impl FnMut(&str),
) -> Result<SyntheticWorkspace, sqlx::Error> {
    let mut rng = SplitMix::new(spec.seed);
    let words = vocabulary(VOCABULARY_SIZE);
    let start = Utc::now() - Duration::days(400);
    let spacing = revision_spacing(spec.revisions);
    let agent = AgentId::generate();
    let agent_actor = ActorId::generate();
    let mut tx = pool.begin().await?;
    let run = &agent.0.simple().to_string()[..8];

    sqlx::query("INSERT INTO actors (id, kind, display_name) VALUES ($1, 'agent', $2)")
        .bind(agent_actor)
        .bind(format!("bench-agent-{run}"))
        .execute(&mut *tx)
        .await?;
    sqlx::query("INSERT INTO runtime_agents (id, name, actor_id) VALUES ($1, $2, $3)")
        .bind(agent)
        .bind(format!("bench-{run}"))
        .bind(agent_actor)
        .execute(&mut *tx)
        .await?;

    progress("actors");
    let actors: Vec<ActorId> = (0..spec.actors()).map(|_| ActorId::generate()).collect();
    let actor_names: HashMap<ActorId, String> =
        actors.iter().enumerate().map(|(i, a)| (*a, format!("Person {i}"))).collect();
    let mut buf = CopyBuffer::new();
    let mut identities = CopyBuffer::new();
    for (i, a) in actors.iter().enumerate() {
        buf.row(&[&a.to_string(), "human", &actor_names[a]]);
        identities.row(&[&Uuid::now_v7().to_string(), "bench", &format!("{run}-U{i}"), &a.to_string()]);
    }
    copy(&mut tx, "COPY actors (id, kind, display_name) FROM STDIN", &buf.text).await?;
    copy(&mut tx, "COPY connector_identities (id, connector, external_id, actor_id) FROM STDIN", &identities.text)
        .await?;

    progress("conversations");
    let mut conversations = Vec::new();
    let mut conv_rows = CopyBuffer::new();
    let mut member_rows = CopyBuffer::new();
    let joined = (start - Duration::days(1)).to_rfc3339();
    for i in 0..spec.conversations() {
        let (topology, low, high) = pick_topology(&mut rng);
        let id = ConversationId::generate();
        let size = rng.range(low, high).min(actors.len());
        let mut members: Vec<ActorId> = Vec::with_capacity(size);
        while members.len() < size {
            let a = actors[rng.range(0, actors.len())];
            if !members.contains(&a) {
                members.push(a);
            }
        }
        members.sort();
        conv_rows.row(&[
            &id.to_string(),
            &agent.to_string(),
            "bench",
            &format!("{run}-C{i}"),
            topology,
            &format!("conversation {i}"),
        ]);
        for m in members.iter().chain(std::iter::once(&agent_actor)) {
            member_rows.row(&[&id.to_string(), &m.to_string(), &joined]);
        }
        conversations.push(SyntheticConversation { id, topology, members });
    }
    copy(
        &mut tx,
        "COPY conversations (id, runtime_agent_id, connector, external_channel_id, topology, title) FROM STDIN",
        &conv_rows.text,
    )
    .await?;
    copy(&mut tx, "COPY conversation_memberships (conversation_id, actor_id, joined_at) FROM STDIN", &member_rows.text)
        .await?;
    let generation = if spec.vectors { Some(create_active_generation(&mut tx).await?) } else { None };

    // Each conversation's members (sorted above) as a source's audience array, as the store writes it.
    let audiences: Vec<String> = conversations
        .iter()
        .map(|c| {
            let listed: Vec<String> = c.members.iter().map(ToString::to_string).collect();
            format!("{{{}}}", listed.join(","))
        })
        .collect();
    // The audience class of every known conversation, as the store creates it with the first
    // memory learned there, then statistics on them. Left to the chunks, the first chunks would
    // create thousands of classes at once, in parallel (each waiting for the other's commit), and
    // plan their class lookups against a table the planner believes empty (a sequential scan of
    // every class per projection row: four minutes a chunk at 10M instead of half a minute).
    let known: Vec<&str> = conversations
        .iter()
        .zip(&audiences)
        .filter(|(c, _)| c.topology != "unknown")
        .map(|(_, audience)| audience.as_str())
        .collect();
    sqlx::query(
        "INSERT INTO audience_classes (runtime_agent_id, members, members_digest)
         SELECT DISTINCT $1, a.members, memory_audience_digest(a.members)
           FROM unnest($2::text[]) AS t(audience) CROSS JOIN LATERAL (SELECT t.audience::uuid[] AS members) a
         ON CONFLICT (runtime_agent_id, members_digest) DO NOTHING",
    )
    .bind(agent)
    .bind(&known)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    sqlx::query("ANALYZE audience_classes").execute(pool).await?;
    let context = ChunkContext {
        agent_text: agent.to_string(),
        conversations: &conversations,
        audiences: &audiences,
        actor_names: &actor_names,
        words: &words,
        start,
        spacing,
        generation,
    };
    let mut loaded_revisions = 0;
    let mut entry_count = 0;
    let mut committed = 0;
    let timer = std::time::Instant::now();
    let mut copying = tokio::task::JoinSet::new();
    while loaded_revisions < spec.revisions || !copying.is_empty() {
        // Generate the next chunk while up to COPY_CONNECTIONS earlier ones are being copied.
        if loaded_revisions < spec.revisions && copying.len() < COPY_CONNECTIONS {
            let goal = (loaded_revisions + CHUNK_REVISIONS).min(spec.revisions);
            let chunk = generate_chunk(&mut rng, &context, loaded_revisions, goal, spec.revisions);
            loaded_revisions += chunk.revisions;
            entry_count += chunk.entries;
            copying.spawn(copy_chunk_with_retry(pool.clone(), chunk));
            continue;
        }
        let Some(done) = copying.join_next().await else { break };
        committed += done.map_err(|e| sqlx::Error::Protocol(format!("a chunk's copy task failed: {e}")))??;
        progress(&format!(
            "loaded {committed} of {} revisions ({:.0}/s)",
            spec.revisions,
            committed as f64 / timer.elapsed().as_secs_f64().max(1e-9)
        ));
    }
    // VACUUM as well as ANALYZE: it sets the visibility map, as autovacuum does on a settled
    // store, so that index-only scans (the eligible set by audience class) skip the heap.
    progress("vacuum analyze");
    sqlx::query("VACUUM (ANALYZE)").execute(pool).await?;
    Ok(SyntheticWorkspace {
        agent,
        conversations,
        vocabulary: words,
        revisions: loaded_revisions,
        entries: entry_count,
    })
}

/// Creates the active embedding generation of the hashing embedder (as `index run` would leave a
/// store) and returns its id.
pub(crate) async fn create_active_generation(conn: &mut sqlx::PgConnection) -> Result<i64, sqlx::Error> {
    let embedder = HashingEmbedder::default();
    let info = crate::semantic::Embedder::info(&embedder);
    sqlx::query_scalar(
        "INSERT INTO embedding_generations (provider, model, dimension, state, activated_at, document_form)
         VALUES ($1, $2, $3, 'active', now(), $4) RETURNING id",
    )
    .bind(&info.provider)
    .bind(&info.model)
    .bind(info.dimension as i32)
    .bind(crate::semantic::DOCUMENT_FORM)
    .fetch_one(conn)
    .await
}

/// One `revision_embeddings` COPY row: the hashing embedder's vector of the text the index
/// worker would embed for this revision.
pub(crate) fn embedding_row(generation: i64, revision: &Uuid, subject: Option<&str>, body: &str) -> String {
    let document = crate::semantic::document_text(subject, body);
    let vector: Vec<String> = hash_vector(&document).iter().map(|x| format!("{x:.5}")).collect();
    let embedder = HashingEmbedder::default();
    let info = crate::semantic::Embedder::info(&embedder);
    format!("{generation}\t{revision}\t{}\t{}\t[{}]\n", info.model, info.dimension, vector.join(","))
}

/// What every chunk of one build shares.
struct ChunkContext<'a> {
    agent_text: String,
    conversations: &'a [SyntheticConversation],
    audiences: &'a [String],
    actor_names: &'a HashMap<ActorId, String>,
    words: &'a [String],
    start: chrono::DateTime<Utc>,
    spacing: Duration,
    generation: Option<i64>,
}

/// One chunk's rows as COPY text.
struct Chunk {
    revisions: usize,
    entries: usize,
    entry_rows: CopyBuffer,
    messages: CopyBuffer,
    revision_rows: CopyBuffer,
    embeddings: String,
    sources: CopyBuffer,
}

/// Generates entries until `goal` revisions exist (of `total`), drawing from `rng` in the same
/// order whatever the chunk size, so a seed always builds the same store.
fn generate_chunk(rng: &mut SplitMix, ctx: &ChunkContext<'_>, loaded: usize, goal: usize, total: usize) -> Chunk {
    let mut chunk = Chunk {
        revisions: 0,
        entries: 0,
        entry_rows: CopyBuffer::new(),
        messages: CopyBuffer::new(),
        revision_rows: CopyBuffer::new(),
        embeddings: String::new(),
        sources: CopyBuffer::new(),
    };
    let agent_text = ctx.agent_text.as_str();
    while loaded + chunk.revisions < goal {
        let loaded_revisions = loaded + chunk.revisions;
        let conversation_index = rng.range(0, ctx.conversations.len());
        let conversation = &ctx.conversations[conversation_index];
        let speaker = conversation.members[rng.range(0, conversation.members.len())];
        let revision_count = if rng.unit() < 0.1 { 2 } else { 1 }.min(total - loaded_revisions);
        let forgotten = rng.unit() < 0.05;
        let entry = Uuid::now_v7();
        let revision_ids: Vec<Uuid> = (0..revision_count).map(|_| Uuid::now_v7()).collect();
        let created = ctx.start + ctx.spacing * (loaded_revisions as i32);
        let created_text = created.to_rfc3339();
        let current = revision_ids[revision_count - 1];
        chunk.entry_rows.row(&[
            &entry.to_string(),
            agent_text,
            if forgotten { "forgotten" } else { "live" },
            &conversation.id.to_string(),
            &current.to_string(),
            &created_text,
            if forgotten { &created_text } else { NULL },
        ]);
        let has_subject = rng.unit() < 0.8;
        let subject = if has_subject { speaker.to_string() } else { NULL.to_string() };
        for (n, revision) in revision_ids.iter().enumerate() {
            let body = sentence(rng, ctx.words, 8, 16);
            let message = Uuid::now_v7();
            chunk.messages.row(&[
                &message.to_string(),
                agent_text,
                &conversation.id.to_string(),
                "inbound",
                &speaker.to_string(),
                &body,
                &created_text,
            ]);
            chunk.revision_rows.row(&[
                &revision.to_string(),
                &entry.to_string(),
                agent_text,
                &(n + 1).to_string(),
                if n == 0 { "create" } else { "amend" },
                &body,
                &subject,
                &speaker.to_string(),
                &created_text,
            ]);
            if let (Some(generation), true) = (ctx.generation, *revision == current && !forgotten) {
                let name = has_subject.then(|| ctx.actor_names[&speaker].as_str());
                chunk.embeddings.push_str(&embedding_row(generation, revision, name, &body));
            }
            let source = Uuid::now_v7();
            let known = conversation.topology != "unknown";
            chunk.sources.row(&[
                &source.to_string(),
                &revision.to_string(),
                agent_text,
                "message",
                &message.to_string(),
                if known { "known" } else { "unknown" },
                "synthetic",
                if known { &ctx.audiences[conversation_index] } else { NULL },
            ]);
        }
        chunk.revisions += revision_count;
        chunk.entries += 1;
    }
    chunk
}

/// Copies one chunk: entries, messages, revisions, their embeddings, then the sources (whose
/// statement trigger writes the evidence summary and, from it, the projection rows).
async fn copy_chunk(tx: &mut sqlx::PgConnection, chunk: &Chunk) -> Result<(), sqlx::Error> {
    copy(tx, "COPY memory_entries (id, runtime_agent_id, state, origin_conversation_id, current_revision_id, created_at, forgotten_at) FROM STDIN", &chunk.entry_rows.text).await?;
    copy(
        tx,
        "COPY messages (id, runtime_agent_id, conversation_id, direction, sender_actor_id, body, sent_at) FROM STDIN",
        &chunk.messages.text,
    )
    .await?;
    copy(tx, "COPY memory_entry_revisions (id, entry_id, runtime_agent_id, revision_number, operation, body, subject_actor_id, source_actor_id, created_at) FROM STDIN", &chunk.revision_rows.text).await?;
    if !chunk.embeddings.is_empty() {
        copy(
            tx,
            "COPY revision_embeddings (generation_id, revision_id, model, dimension, embedding) FROM STDIN",
            &chunk.embeddings,
        )
        .await?;
    }
    copy(tx, "COPY revision_sources (id, revision_id, runtime_agent_id, kind, message_id, evidence, evidence_basis, audience) FROM STDIN", &chunk.sources.text).await?;
    Ok(())
}

/// Copies one chunk in its own transaction and returns its revision count. Two chunks copied at
/// once can deadlock where both add the same new audience classes or fold the same lexemes in
/// another order; PostgreSQL then rolls one back, and it is copied again.
async fn copy_chunk_with_retry(pool: PgPool, chunk: Chunk) -> Result<usize, sqlx::Error> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut tx = pool.begin().await?;
        let copied = match copy_chunk(&mut tx, &chunk).await {
            Ok(()) => tx.commit().await,
            Err(error) => Err(error),
        };
        match copied {
            Ok(()) => return Ok(chunk.revisions),
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("40P01") && attempt < 5 => continue,
            Err(error) => return Err(error),
        }
    }
}

/// The topology names [`build`] writes, as `'static` strings for [`SyntheticConversation`].
fn topology_name(stored: &str) -> &'static str {
    ["direct", "group", "channel", "unknown"].into_iter().find(|t| *t == stored).unwrap_or("unknown")
}

/// Reads back the workspace [`build`] loaded into this database (its one benchmark agent), so a
/// kept store can be measured again without loading it again. Conversations come back in load
/// order with their members sorted, as `build` returned them, so the same seed asks the same
/// queries.
pub async fn load(pool: &PgPool) -> Result<SyntheticWorkspace, sqlx::Error> {
    let (agent, agent_actor): (AgentId, ActorId) =
        sqlx::query_as("SELECT id, actor_id FROM runtime_agents WHERE name LIKE 'bench-%' ORDER BY id LIMIT 1")
            .fetch_one(pool)
            .await?;
    let rows: Vec<(ConversationId, String, Vec<Uuid>)> = sqlx::query_as(
        "SELECT c.id, c.topology::text,
                array(SELECT m.actor_id FROM conversation_memberships m
                       WHERE m.conversation_id = c.id AND m.actor_id <> $2 ORDER BY m.actor_id)
           FROM conversations c
          WHERE c.runtime_agent_id = $1 AND c.external_channel_id ~ '-C[0-9]+$'
          ORDER BY substring(c.external_channel_id FROM '-C([0-9]+)$')::bigint",
    )
    .bind(agent)
    .bind(agent_actor)
    .fetch_all(pool)
    .await?;
    let conversations = rows
        .into_iter()
        .map(|(id, topology, members)| SyntheticConversation {
            id,
            topology: topology_name(&topology),
            members: members.into_iter().map(ActorId).collect(),
        })
        .collect();
    let (revisions, entries): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM memory_entry_revisions WHERE runtime_agent_id = $1),
                (SELECT count(*) FROM memory_entries WHERE runtime_agent_id = $1)",
    )
    .bind(agent)
    .fetch_one(pool)
    .await?;
    Ok(SyntheticWorkspace {
        agent,
        conversations,
        vocabulary: vocabulary(VOCABULARY_SIZE),
        revisions: revisions as usize,
        entries: entries as usize,
    })
}
