//! The command line as clap parses it: `Cli`, every command and subcommand with its arguments
//! and help text. No behaviour here: `dispatch` maps each parsed command to the core.

use clap::{Parser, Subcommand};

/// Durable, audience-safe, explainable memory for an AI agent runtime.
///
/// Without DATABASE_URL every command runs on the embedded PostgreSQL cluster under the data
/// directory (MESH_DATA_DIR), starting it for the command and stopping it after, unless
/// `db start` left it running.
#[derive(Parser, Debug)]
#[command(name = "mesh-memory", version, about)]
pub(crate) struct Cli {
    /// PostgreSQL URL; unset means the embedded cluster.
    #[arg(long, env = "DATABASE_URL", global = true, hide_env_values = true)]
    pub(crate) database_url: Option<String>,
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    pub(crate) json: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Manage the embedded PostgreSQL cluster.
    Db {
        #[command(subcommand)]
        action: DbAction,
    },
    /// Demo data.
    Demo {
        #[command(subcommand)]
        action: DemoAction,
    },
    /// Erase stored text under operator authority: the one destructive operation. The bodies of
    /// the erased revisions and messages (and their copies in turn records, replies, rationales
    /// and notes) become `[erased]`; ids, lineage and audits stay. Signs in as --operator (a member
    /// of mesh_eraser) with MESH_OPERATOR_PASSWORD; MESH_AGENT_MASTER_KEY keys the fingerprints
    /// `erase verify` scans for. Run with --dry-run first, then again with --confirm DIGEST.
    Erase {
        #[command(subcommand)]
        action: EraseAction,
    },
    /// Login roles for the console's three kinds of user (run as the database's administrator).
    Role {
        #[command(subcommand)]
        action: RoleAction,
    },
    /// Show an entry's revision history with lineage and audience evidence.
    Show {
        /// Entry id: the full UUID, or the 12-digit short id a prompt or tool result showed.
        entry: String,
    },
    /// Retrieve memories for a turn through the one retrieval service (prints scores and reasons).
    /// Reads MESH_AGENT_MASTER_KEY for the audit query digest; without it no digest is recorded.
    Recall {
        /// Runtime agent name or id.
        #[arg(long)]
        agent: String,
        /// Conversation id or external channel id (e.g. C-ENG).
        #[arg(long)]
        conversation: String,
        /// Current speaker: connector external id (e.g. U456), display name or actor id.
        #[arg(long)]
        actor: Option<String>,
        /// At most this many memories.
        #[arg(long, default_value_t = mesh_memory::retrieval::DEFAULT_MAX_COUNT)]
        max_count: u32,
        /// Memory allowance in upper-bound tokens.
        #[arg(long, default_value_t = mesh_memory::retrieval::DEFAULT_TOKEN_BUDGET)]
        token_budget: u32,
        /// Run (and audit) as automatic prompt assembly and print the prompt section.
        #[arg(long)]
        prompt: bool,
        /// Query text; empty ranks by subject, conversation and recency.
        #[arg(default_value = "")]
        query: String,
    },
    /// The semantic index (embeddings are derived indexes of revision text). The embedder comes
    /// from MESH_EMBEDDER: `local` (all-MiniLM-L6-v2; needs a `--features local-embedder` build
    /// and scripts/setup-embedder.sh) or `openai` (MESH_EMBEDDER_URL, MESH_EMBEDDER_MODEL,
    /// MESH_EMBEDDER_DIMENSION, optional MESH_EMBEDDER_API_KEY).
    Index {
        #[command(subcommand)]
        action: IndexAction,
    },
    /// A throwaway Qdrant on loopback for tests and benchmarks (feature `qdrant`): the server
    /// from `../shared/tools/qdrant/` (or MESH_QDRANT_BIN), state in MESH_QDRANT_DIR.
    #[cfg(feature = "qdrant")]
    Qdrant {
        #[command(subcommand)]
        action: QdrantAction,
    },
    /// Explain an entry's eligibility in a conversation (`explain ENTRY --conversation C`), or an
    /// audited search (`explain EVENT --event`).
    Explain {
        /// Entry id (full, or the 12-digit short id a prompt showed), or retrieval event id with --event.
        id: String,
        /// Conversation id or external channel id (required for an entry).
        #[arg(long)]
        conversation: Option<String>,
        /// Runtime agent name or id (default: the entry's owner).
        #[arg(long)]
        agent: Option<String>,
        /// Treat ID as a retrieval event id.
        #[arg(long)]
        event: bool,
    },
    /// Retrieval quality evaluation.
    Eval {
        #[command(subcommand)]
        suite: EvalSuite,
    },
    /// Speed benchmark: synthetic stores of growing size, recall latency, write throughput.
    Bench {
        /// Store sizes in revisions, comma separated.
        #[arg(long, value_delimiter = ',', default_value = "10000,100000,1000000")]
        sizes: Vec<usize>,
        /// Searches per size.
        #[arg(long, default_value_t = 300)]
        queries: usize,
        /// Seconds per write-throughput measurement.
        #[arg(long, default_value_t = 5.0)]
        write_seconds: f64,
        /// Concurrent writers.
        #[arg(long, default_value_t = 8)]
        writers: usize,
        /// Further writer counts at which group-committed remembers are measured again, comma
        /// separated (throughput and latency depend on how many callers write at once). Each
        /// adds `--write-seconds` of writes to the store, which a `--reuse` run then searches.
        #[arg(long, value_delimiter = ',')]
        remember_writers: Vec<usize>,
        /// Keep the benchmark databases.
        #[arg(long)]
        keep: bool,
        /// Measure the newest kept database of each size (from an earlier `--keep` run) instead
        /// of loading a new one; it is kept again afterwards.
        #[arg(long)]
        reuse: bool,
        /// Measure hybrid recall only up to this many revisions.
        #[arg(long, default_value_t = 1_000_000)]
        hybrid_max: usize,
        /// Vector indexes to measure hybrid recall and the outbox drain with, side by side, comma
        /// separated: `pgvector`, `qdrant` (QDRANT_URL, else a throwaway server),
        /// `qdrant-cluster` (a throwaway three-node cluster, 3 shards, replication factor 2); the
        /// Qdrant ones need a build with `--features qdrant`.
        #[arg(long, value_delimiter = ',', default_value = "pgvector")]
        vector_index: Vec<String>,
        /// Embed each hybrid query with the embedder MESH_EMBEDDER configures (all-MiniLM-L6-v2
        /// in a `--features local-embedder` build), timed in the loop as production pays it; the
        /// searched vector stays the hashing embedder's, which the store's documents carry.
        #[arg(long)]
        query_model: bool,
        /// Also write the report as JSON to this file.
        #[arg(long)]
        json_out: Option<std::path::PathBuf>,
    },
    /// Legacy audience repair: turn unknown evidence into known where the transcript proves it.
    Repair {
        /// Report what would change, change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Why this repair runs (recorded in the evidence log).
        #[arg(long, default_value = "mesh-memory repair")]
        reason: String,
    },
    /// List recent agent turns with their outcome and committed writes.
    Turns {
        /// Runtime agent name or id (default: all).
        #[arg(long)]
        agent: Option<String>,
        /// At most this many turns, newest first.
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Print one turn: its committed ledger, tool calls, claim-guard findings, delivery recheck
    /// and retrieval events.
    Turn {
        /// Turn id.
        id: String,
    },
    /// Interactive turns against an OpenAI-compatible model (MESH_MODEL_BASE_URL, MESH_MODEL_API_KEY,
    /// MESH_MODEL). Each stdin line is an inbound message from the given connector identity;
    /// `/confirm REQUEST_ID` confirms a sharing request as that person; `/quit` ends.
    Chat {
        /// Runtime agent name or id.
        #[arg(long)]
        agent: String,
        /// Conversation id or external channel id (e.g. C-ENG).
        #[arg(long)]
        conversation: String,
        /// The speaker's connector external id (e.g. U456); the connector is the conversation's.
        #[arg(long = "as")]
        speaker: String,
    },
    /// Serve memory to an agent host over the Model Context Protocol (stdio: JSON-RPC on stdin and
    /// stdout; diagnostics go to stderr).
    ///
    /// The server is bound to one runtime agent, one conversation and one speaker, and no tool
    /// argument can change them: every tool call is recorded as that speaker's authenticated
    /// message in that conversation, what it may recall is decided by that conversation's audience,
    /// and what it writes carries that evidence (a memory made in a direct conversation stays
    /// private to its members). Tools: remember, recall, amend, forget, request_memory_sharing (the
    /// turn engine's own schemas and rules); prompt: memory_context.
    ///
    /// On stdio the binding comes from the access token in MESH_MCP_TOKEN (issued by an operator
    /// with `mcp token create`; checked again on every call, so a revoked or expired token stops
    /// the session), with DATABASE_URL a login of mesh_runtime and MESH_AUDIT_DIGEST_KEY (from
    /// `mcp digest-key`) instead of the master key. `--agent/--conversation/--as` bind it instead
    /// for an operator's own scripted use: they need --operator and MESH_OPERATOR_PASSWORD (a
    /// member of mesh_operator vouches for the speaker).
    ///
    /// With `--http ADDR` (a loopback address, e.g. 127.0.0.1:8765) it serves streamable HTTP
    /// instead, and each request is bound by its bearer token (as above); a missing, unknown,
    /// revoked or expired token gets 401 and nothing is read or written.
    #[cfg(feature = "mcp")]
    #[command(args_conflicts_with_subcommands = true)]
    Mcp {
        #[command(subcommand)]
        action: Option<McpAction>,
        /// Runtime agent name or id (stdio bound by arguments).
        #[arg(long, requires_all = ["conversation", "speaker", "operator"])]
        agent: Option<String>,
        /// The conversation every call is made in: id or external channel id, e.g. D-PRIYA (stdio
        /// bound by arguments).
        #[arg(long, requires_all = ["agent", "speaker", "operator"])]
        conversation: Option<String>,
        /// The bound speaker: their connector user id on the conversation's connector, e.g. U456
        /// (stdio bound by arguments).
        #[arg(long = "as", requires_all = ["agent", "conversation", "operator"])]
        speaker: Option<String>,
        /// Your operator login role (a member of mesh_operator; its password from
        /// MESH_OPERATOR_PASSWORD), vouching for a binding given by arguments.
        #[arg(long, env = "MESH_OPERATOR_ROLE")]
        operator: Option<String>,
        /// Serve streamable HTTP on this loopback address instead of stdio (port 0 picks one;
        /// the bound address is printed on stderr).
        #[arg(long, conflicts_with_all = ["agent", "conversation", "speaker"])]
        http: Option<std::net::SocketAddr>,
    },
}

/// `mcp` subcommands.
#[cfg(feature = "mcp")]
#[derive(Subcommand, Debug)]
pub(crate) enum McpAction {
    /// Access tokens of the HTTP and stdio transports (stored only as hashes).
    Token {
        #[command(subcommand)]
        action: TokenAction,
    },
    /// Print the audit digest key (64 hex digits) derived from MESH_AGENT_MASTER_KEY, for an MCP
    /// host's MESH_AUDIT_DIGEST_KEY: the host's searches are then audited with the same query
    /// digest as the runtime's, and the host never holds the master key (which also keys erasure
    /// fingerprints). An administrator runs this; the key is a secret.
    DigestKey,
}

/// `mcp token` subcommands.
#[cfg(feature = "mcp")]
#[derive(Subcommand, Debug)]
pub(crate) enum TokenAction {
    /// Issue a token bound to an agent, a conversation and a speaker; prints it once. Runs as your
    /// own operator login role (member of `mesh_operator`; its password from
    /// MESH_OPERATOR_PASSWORD), which the database records with the reason, the binding and the
    /// expiry in `operator_actions`, as a revocation is recorded.
    Create {
        /// Runtime agent name or id.
        #[arg(long)]
        agent: String,
        /// Conversation id or external channel id.
        #[arg(long)]
        conversation: String,
        /// The speaker's connector user id on the conversation's connector.
        #[arg(long = "as")]
        speaker: String,
        /// What the token is for (shown in listings; at most 200 characters).
        #[arg(long, default_value = "")]
        label: String,
        /// Why it is issued (a ticket reference, say); required, 1 to 2000 characters.
        #[arg(long)]
        reason: String,
        /// Your operator login role.
        #[arg(long, env = "MESH_OPERATOR_ROLE")]
        operator: String,
        /// It stops authenticating after this long: a number and a unit, m (minutes), h, d or w
        /// (e.g. 30d). Without an expiry a token lasts until revoked.
        #[arg(long, conflicts_with = "expires_at")]
        expires_in: Option<String>,
        /// It stops authenticating at this time: RFC 3339 (2027-01-31T18:00:00Z) or a date
        /// (2027-01-31, midnight UTC).
        #[arg(long)]
        expires_at: Option<String>,
    },
    /// List tokens (never their secrets): binding, created, last used, revoked, expiry.
    List {
        /// Only this runtime agent's.
        #[arg(long)]
        agent: Option<String>,
    },
    /// Revoke a token now: its next request gets 401. Runs as your own operator login role
    /// (member of `mesh_operator`; its password from MESH_OPERATOR_PASSWORD), which the database
    /// records with the reason in `operator_actions`, exactly as the console's revoke does.
    Revoke {
        /// Token id (from `list`).
        id: String,
        /// Why (a ticket reference, say); required, 1 to 2000 characters.
        #[arg(long)]
        reason: String,
        /// Your operator login role.
        #[arg(long, env = "MESH_OPERATOR_ROLE")]
        operator: String,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum IndexAction {
    /// Embed and index the pending outbox work, then exit; `--watch` keeps running until Ctrl-C.
    Run {
        /// Keep polling the outbox until interrupted.
        #[arg(long)]
        watch: bool,
    },
    /// Build a new embedding generation from every current revision (progress bar on stderr) and
    /// switch to it atomically; reruns resume an interrupted rebuild.
    Rebuild {
        /// Abandon the building generation instead (semantic search returns to the active one).
        #[arg(long)]
        abandon: bool,
    },
    /// Generations, rebuild progress and outbox counts.
    Status,
}

#[cfg(feature = "qdrant")]
#[derive(Subcommand, Debug)]
pub(crate) enum QdrantAction {
    /// Start a server (or `--nodes N` in distributed mode) on free loopback ports with its own
    /// storage, wait until it is ready and leave it running; prints its gRPC URL.
    Start {
        /// Nodes: 1 is a plain server, more form a cluster.
        #[arg(long, default_value_t = 1)]
        nodes: usize,
    },
    /// Print the gRPC URL of the running throwaway Qdrant (what QDRANT_URL takes).
    Url,
    /// Stop it and remove its storage.
    Stop,
}

#[derive(Subcommand, Debug)]
pub(crate) enum DbAction {
    /// Initialize (first time) and start the cluster, leaving it running.
    Start {
        /// Throwaway cluster for tests: fsync off.
        #[arg(long)]
        ephemeral: bool,
    },
    /// Stop the cluster.
    Stop,
    /// Report whether the cluster is initialized and running.
    Status,
    /// Apply pending migrations.
    Migrate,
    /// Print the connection URL of the embedded cluster (it contains the generated password).
    Url,
}

#[derive(Subcommand, Debug)]
pub(crate) enum RoleAction {
    /// Create a login role for one person: an operator (decides sharing requests, reviews
    /// evidence, issues and revokes access tokens), an auditor (reads everything the console
    /// shows, changes nothing) or an eraser (erases stored text). The password is read from
    /// MESH_NEW_ROLE_PASSWORD, or one line on stdin (never an argument), and only its SCRAM
    /// verifier, computed here, is sent. Runs as DATABASE_URL's role, which needs CREATEROLE;
    /// with --print-sql nothing is connected to: the CREATE ROLE statement is printed for an
    /// administrator to run in psql.
    Create {
        /// The role's name: lower-case letters, digits or `_`, starting with a letter.
        name: String,
        /// What the person may do.
        #[arg(long, value_enum)]
        kind: RoleKind,
        /// Print the CREATE ROLE statement (with the verifier, not the password) instead of
        /// running it.
        #[arg(long)]
        print_sql: bool,
    },
}

/// The kinds of console user `role create` makes a login for.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub(crate) enum RoleKind {
    /// Member of mesh_operator.
    Operator,
    /// Member of mesh_console_reader.
    Auditor,
    /// Member of mesh_eraser and mesh_console_reader.
    Eraser,
}

impl From<RoleKind> for mesh_memory::store::ConsoleRoleKind {
    fn from(kind: RoleKind) -> Self {
        match kind {
            RoleKind::Operator => Self::Operator,
            RoleKind::Auditor => Self::Auditor,
            RoleKind::Eraser => Self::Eraser,
        }
    }
}

#[derive(Subcommand, Debug)]
pub(crate) enum EvalSuite {
    /// LoCoMo-format data: every turn a memory, every question with evidence a query; recall@5,
    /// recall@10, nDCG@10 and MRR per variant and category, against BM25 in the same run.
    Locomo {
        /// The LoCoMo JSON file (read in place; never copy it into the repository).
        path: std::path::PathBuf,
        /// Evaluate at most this many samples.
        #[arg(long)]
        max_samples: Option<usize>,
        /// Also write the report as JSON to this file.
        #[arg(long)]
        json_out: Option<std::path::PathBuf>,
        /// Also write one JSON line per question and variant to this file: sample id, question
        /// index, category, evidence ids, the selected turn ids in rank order, the rendered prompt
        /// section and whether it holds the answer. No question text.
        #[arg(long)]
        questions_out: Option<std::path::PathBuf>,
        /// Keep the scratch database.
        #[arg(long)]
        keep: bool,
        /// Retrieval settings for every variant, `name=value[,name=value]` (e.g.
        /// `semantic_weight=0.5,bm25_b=0.6`); names are `RetrievalConfig`'s tunable fields.
        #[arg(long = "set", value_name = "SETTINGS")]
        settings: Vec<String>,
        /// Also evaluate a hybrid variant with other settings, `NAME:name=value[,...]`, reported as
        /// `hybrid:NAME` (repeatable; every variant shares one load of the data).
        #[arg(long = "also", value_name = "NAME:SETTINGS")]
        also: Vec<String>,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum DemoAction {
    /// Create the demo workspace (once).
    Seed,
}

/// `erase` subcommands.
#[derive(Subcommand, Debug)]
pub(crate) enum EraseAction {
    /// Every revision of one entry.
    Entry {
        /// Entry id: the full UUID or the 12-digit short id.
        entry: String,
        #[command(flatten)]
        confirm: EraseConfirmation,
    },
    /// Every memory about or told by one person, and the messages they sent.
    Person {
        /// The person: connector external id (e.g. U321), display name or actor id.
        person: String,
        /// Only within this runtime agent (name or id); every agent without it.
        #[arg(long)]
        agent: Option<String>,
        #[command(flatten)]
        confirm: EraseConfirmation,
    },
    /// Check an erasure: erased bodies are markers, no embedding or search row is left, the
    /// planner statistics of the tables it rewrote are newer than it, and (with the
    /// MESH_AGENT_MASTER_KEY it ran with) no text, JSON, array or tsvector column of any table
    /// nor any planner statistic holds its text. Exits 1 when anything is found.
    Verify {
        /// Erasure id (printed by `erase entry|person`).
        erasure: String,
    },
}

/// What every erasure asks for.
#[derive(clap::Args, Debug)]
pub(crate) struct EraseConfirmation {
    /// Why (a ticket reference, say); required, 1 to 2000 characters.
    #[arg(long, required_unless_present = "dry_run")]
    pub(crate) reason: Option<String>,
    /// Show what would be erased (counts per kind, the revisions and messages) and the
    /// confirmation digest of exactly that, and change nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// The confirmation digest the dry run printed: the erasure goes ahead only if what it
    /// reaches now is exactly what that dry run showed (else refused, MM011: dry-run again).
    #[arg(long, value_name = "DIGEST", conflicts_with = "dry_run")]
    pub(crate) confirm: Option<String>,
    /// Your operator login role (a member of mesh_eraser).
    #[arg(long, env = "MESH_OPERATOR_ROLE", required_unless_present = "dry_run")]
    pub(crate) operator: Option<String>,
}
