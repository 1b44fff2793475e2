//! The `mesh-memory` command line: a thin layer over the core crate. Parsing and printing live
//! here; every decision lives in the library.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use mesh_memory::database::{self, OpenDatabase};
use mesh_memory::operator;
use mesh_memory::pg::EmbeddedCluster;
use mesh_memory::store::{EntryHistory, EvidenceView, Store};
use mesh_memory::EntryId;

/// Durable, audience-safe, explainable memory for an AI agent runtime.
///
/// Without DATABASE_URL every command runs on the embedded PostgreSQL cluster under the data
/// directory (MESH_DATA_DIR), starting it for the command and stopping it after, unless
/// `db start` left it running.
#[derive(Parser, Debug)]
#[command(name = "mesh-memory", version, about)]
struct Cli {
    /// PostgreSQL URL; unset means the embedded cluster.
    #[arg(long, env = "DATABASE_URL", global = true, hide_env_values = true)]
    database_url: Option<String>,
    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
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
    /// The server is bound at launch to one runtime agent, one conversation and one speaker, and no
    /// tool argument can change them: every tool call is recorded as that speaker's authenticated
    /// message in that conversation, what it may recall is decided by that conversation's audience,
    /// and what it writes carries that evidence (a memory made in a direct conversation stays
    /// private to its members). Whoever writes the host configuration vouches for the speaker, as a
    /// connector does for its users. Tools: remember, recall, amend, forget,
    /// request_memory_sharing (the turn engine's own schemas and rules); prompt: memory_context.
    ///
    /// With `--http ADDR` (a loopback address, e.g. 127.0.0.1:8765) it serves streamable HTTP
    /// instead, and each request is bound by the bearer token an operator issued with `mcp token
    /// create` (agent, conversation and speaker, as above); a missing, unknown or revoked token gets
    /// 401 and nothing is read or written.
    #[cfg(feature = "mcp")]
    #[command(args_conflicts_with_subcommands = true)]
    Mcp {
        #[command(subcommand)]
        action: Option<McpAction>,
        /// Runtime agent name or id (stdio).
        #[arg(long, required_unless_present = "http")]
        agent: Option<String>,
        /// The conversation every call is made in: id or external channel id, e.g. D-PRIYA (stdio).
        #[arg(long, required_unless_present = "http")]
        conversation: Option<String>,
        /// The bound speaker: their connector user id on the conversation's connector, e.g. U456
        /// (stdio).
        #[arg(long = "as", required_unless_present = "http")]
        speaker: Option<String>,
        /// Serve streamable HTTP on this loopback address instead of stdio (port 0 picks one;
        /// the bound address is printed on stderr).
        #[arg(long, conflicts_with_all = ["agent", "conversation", "speaker"])]
        http: Option<std::net::SocketAddr>,
    },
}

/// `mcp` subcommands.
#[cfg(feature = "mcp")]
#[derive(Subcommand, Debug)]
enum McpAction {
    /// Access tokens of the HTTP transport (stored only as hashes).
    Token {
        #[command(subcommand)]
        action: TokenAction,
    },
}

/// `mcp token` subcommands.
#[cfg(feature = "mcp")]
#[derive(Subcommand, Debug)]
enum TokenAction {
    /// Issue a token bound to an agent, a conversation and a speaker; prints it once.
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
        /// What the token is for (shown in listings).
        #[arg(long, default_value = "")]
        label: String,
    },
    /// List tokens (never their secrets): binding, created, last used, revoked.
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
enum IndexAction {
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
enum QdrantAction {
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
enum DbAction {
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
enum EvalSuite {
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
enum DemoAction {
    /// Create the demo workspace (once).
    Seed,
}

#[tokio::main]
async fn main() -> ExitCode {
    // Behave like other Unix tools when the reader goes away (`mesh-memory turns | head`): end
    // quietly on SIGPIPE instead of panicking inside println!.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread writes to stdout.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("MESH_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Db { action } => db(action, cli.database_url.as_deref(), cli.json).await,
        Command::Demo { action: DemoAction::Seed } => {
            with_store(cli.database_url.as_deref(), |store| async move { demo_seed(&store, cli.json).await }).await
        }
        Command::Eval {
            suite: EvalSuite::Locomo { path, max_samples, json_out, questions_out, keep, settings, also },
        } => {
            let mut config = mesh_memory::retrieval::RetrievalConfig::default();
            for setting in &settings {
                config = config.with_settings(setting)?;
            }
            let mut extra_hybrid = Vec::new();
            for variant in &also {
                let (name, settings) = variant
                    .split_once(':')
                    .with_context(|| format!("--also {variant:?}: expected NAME:name=value[,...]"))?;
                extra_hybrid.push((name.to_owned(), config.clone().with_settings(settings)?));
            }
            let run = EvalRun {
                max_samples,
                json_out: json_out.as_deref(),
                questions_out: questions_out.as_deref(),
                keep,
                config,
                extra_hybrid,
            };
            eval_locomo(cli.database_url.as_deref(), &path, run).await
        }
        Command::Bench {
            sizes,
            queries,
            write_seconds,
            writers,
            remember_writers,
            keep,
            reuse,
            hybrid_max,
            vector_index,
            json_out,
        } => {
            let (vector_indexes, _servers) = bench_indexes(&vector_index).await?;
            let options = mesh_memory::bench::BenchOptions {
                sizes,
                queries,
                write_duration: std::time::Duration::from_secs_f64(write_seconds),
                writers,
                remember_writers,
                keep_databases: keep,
                reuse_databases: reuse,
                hybrid_max_revisions: hybrid_max,
                vector_indexes,
            };
            bench(cli.database_url.as_deref(), &options, json_out.as_deref()).await
        }
        Command::Repair { dry_run, reason } => {
            with_store(
                cli.database_url.as_deref(),
                |store| async move { repair(&store, dry_run, &reason, cli.json).await },
            )
            .await
        }
        Command::Recall { agent, conversation, actor, max_count, token_budget, prompt, query } => {
            let args = RecallArgs { agent, conversation, actor, max_count, token_budget, prompt, query };
            with_store(cli.database_url.as_deref(), |store| async move { recall(&store, args, cli.json).await }).await
        }
        Command::Index { action } => {
            with_store(cli.database_url.as_deref(), |store| async move { index(&store, action, cli.json).await }).await
        }
        #[cfg(feature = "qdrant")]
        Command::Qdrant { action } => qdrant(action).await,
        Command::Explain { id, conversation, agent, event } => {
            with_store(cli.database_url.as_deref(), |store| async move {
                explain(&store, &id, conversation.as_deref(), agent.as_deref(), event, cli.json).await
            })
            .await
        }
        Command::Turns { agent, limit } => {
            with_store(cli.database_url.as_deref(), |store| async move {
                turns(&store, agent.as_deref(), limit, cli.json).await
            })
            .await
        }
        Command::Turn { id } => {
            let id: mesh_memory::turn::TurnId = id.parse()?;
            with_store(cli.database_url.as_deref(), |store| async move { turn(&store, id, cli.json).await }).await
        }
        #[cfg(feature = "mcp")]
        Command::Mcp { action: Some(McpAction::Token { action }), .. } => {
            with_store(cli.database_url.as_deref(), |store| async move { mcp_token(&store, action, cli.json).await })
                .await
        }
        #[cfg(feature = "mcp")]
        Command::Mcp { action: None, http: Some(addr), .. } => {
            with_store(cli.database_url.as_deref(), |store| async move {
                let retriever = retriever_from_environment(&store)?;
                let listening = |bound| eprintln!("mesh-memory MCP server on http://{bound}/ (bearer tokens)");
                mesh_memory::mcp::serve_http(retriever, store.clone(), addr, listening).await?;
                Ok(())
            })
            .await
        }
        #[cfg(feature = "mcp")]
        Command::Mcp { action: None, http: None, agent, conversation, speaker } => {
            let (Some(agent), Some(conversation), Some(speaker)) = (agent, conversation, speaker) else {
                anyhow::bail!("mcp on stdio needs --agent, --conversation and --as (or --http ADDR)");
            };
            with_store(cli.database_url.as_deref(), |store| async move {
                mcp(&store, &agent, &conversation, &speaker).await
            })
            .await
        }
        Command::Chat { agent, conversation, speaker } => {
            with_store(cli.database_url.as_deref(), |store| async move {
                chat(&store, &agent, &conversation, &speaker).await
            })
            .await
        }
        Command::Show { entry } => {
            with_store(cli.database_url.as_deref(), |store| async move {
                let entry = store.find_entry(&entry).await?;
                show(&store, entry, cli.json).await
            })
            .await
        }
    }
}

/// Opens the database, runs `work`, and closes it (stopping an embedded cluster it started),
/// whether or not `work` succeeded.
async fn with_store<F, Fut>(url: Option<&str>, work: F) -> Result<()>
where
    F: FnOnce(Store) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let db: OpenDatabase = database::open(url).await.context("opening the memory database")?;
    let result = work(Store::new(db.pool.clone())).await;
    db.close().await;
    result
}

fn print_json<T: serde::Serialize>(value: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

async fn db(action: DbAction, url: Option<&str>, json: bool) -> Result<()> {
    if let DbAction::Migrate = action {
        if let Some(url) = url {
            let pool = database::connect(url).await.context("connecting to DATABASE_URL")?;
            database::migrate(&pool).await.context("applying migrations")?;
            println!("migrations applied");
            return Ok(());
        }
    } else if url.is_some() {
        anyhow::bail!("`db {action:?}` manages the embedded cluster; unset DATABASE_URL to use it");
    }
    let cluster = EmbeddedCluster::at_default_location()?;
    match action {
        DbAction::Start { ephemeral } => {
            let started = cluster.start(ephemeral)?;
            let pool = database::connect(&cluster.url()?).await.context("connecting to the embedded cluster")?;
            database::migrate(&pool).await.context("applying migrations")?;
            pool.close().await;
            println!("{}", if started { "embedded PostgreSQL started" } else { "embedded PostgreSQL already running" });
        }
        DbAction::Stop => {
            let stopped = cluster.stop()?;
            println!("{}", if stopped { "embedded PostgreSQL stopped" } else { "embedded PostgreSQL was not running" });
        }
        DbAction::Status => {
            let status = cluster.status();
            if json {
                print_json(&status)?;
            } else {
                println!("data directory: {}", status.data_dir.display());
                println!("binaries:       {}", status.bin_dir.display());
                println!("initialized:    {}", status.initialized);
                println!("running:        {}", status.running);
            }
        }
        DbAction::Migrate => {
            let guard = cluster.start_guarded()?;
            let pool = database::connect(&guard.cluster().url()?).await?;
            database::migrate(&pool).await.context("applying migrations")?;
            pool.close().await;
            println!("migrations applied");
        }
        DbAction::Url => println!(
            "{}",
            cluster.url().context("the embedded cluster is not initialized; run `mesh-memory db start`")?
        ),
    }
    Ok(())
}

async fn demo_seed(store: &Store, json: bool) -> Result<()> {
    if mesh_memory::demo::is_seeded(store).await? {
        println!("demo workspace already seeded (runtime agent {:?})", mesh_memory::demo::DEMO_AGENT);
        return Ok(());
    }
    let workspace = mesh_memory::demo::seed(store).await.context("seeding the demo workspace")?;
    if json {
        return print_json(&workspace);
    }
    println!("seeded runtime agent {} ({})", mesh_memory::demo::DEMO_AGENT, workspace.agent);
    println!("conversations:");
    for (name, id) in &workspace.conversations {
        println!("  {name:<14} {id}");
    }
    println!("actors:");
    for (name, id) in &workspace.actors {
        println!("  {name:<18} {id}");
    }
    println!("entries (try `mesh-memory show ID`):");
    for (name, id) in &workspace.entries {
        println!("  {name:<18} {id}");
    }
    println!("turns run through the engine with a scripted model (try `mesh-memory turn ID`):");
    for t in &workspace.turns {
        println!("  {:<34} {}  {}", t.name, t.turn_id, t.outcome);
    }
    if let Some(request) = workspace.pending_sharing_request {
        println!("pending sharing request: {request}");
    }
    if let Some(event) = workspace.withheld_diagnostic_event {
        println!("eligibility_withheld_unknown event: {event} (try `mesh-memory explain {event} --event`)");
    }
    Ok(())
}

async fn show(store: &Store, entry: EntryId, json: bool) -> Result<()> {
    let agent = store.entry_owner(entry).await?.with_context(|| format!("no entry {entry}"))?;
    let history = store.entry_history(agent, entry).await?.with_context(|| format!("no entry {entry}"))?;
    if json {
        return print_json(&history);
    }
    print_history(&history);
    Ok(())
}

fn print_history(h: &EntryHistory) {
    println!("entry {}  state: {:?}  always-on: {}  restriction: {}", h.entry_id, h.state, h.always_on, h.restriction);
    for r in &h.revisions {
        let current = if r.id == h.current_revision_id { "  [current]" } else { "" };
        println!(
            "\nrevision {} ({}) {}  written {}{}",
            r.revision_number,
            r.operation,
            r.id,
            r.created_at.format("%Y-%m-%d %H:%M"),
            current
        );
        println!("  learned: {} (UTC; when it was told)", r.learned_at.format("%Y-%m-%d %H:%M"));
        println!("  subject: {}", r.subject_label.as_deref().unwrap_or("(not resolved)"));
        println!("  source:  {}", r.source_label.as_deref().unwrap_or("(system)"));
        println!("  body:    {}", r.body);
        println!("  lineage:");
        for s in &r.sources {
            let target = match (&s.message_id, &s.parent_revision_id) {
                (Some(m), _) => format!("message {m}"),
                (_, Some(p)) => format!("revision {p}"),
                _ => String::new(),
            };
            let evidence = match &s.evidence {
                EvidenceView::Known { labels, .. } => format!("audience known: {}", labels.join(", ")),
                EvidenceView::Unknown => "audience UNKNOWN (withheld from retrieval)".to_owned(),
            };
            println!("    - {:<18} {target}\n      {evidence}  [{}]", s.kind, s.evidence_basis);
        }
    }
}

async fn repair(store: &Store, dry_run: bool, reason: &str, json: bool) -> Result<()> {
    let repaired = mesh_memory::privacy::repair::repair_audience_evidence(store.pool(), reason, dry_run).await?;
    if json {
        return print_json(&repaired);
    }
    let verb = if dry_run { "would repair" } else { "repaired" };
    println!("{verb} {} source(s){}", repaired.len(), if dry_run { " (dry run: nothing changed)" } else { "" });
    for r in &repaired {
        let audience: Vec<String> = r.audience.iter().map(ToString::to_string).collect();
        println!(
            "  source {} of revision {}: {} -> audience {{{}}}",
            r.source_id,
            r.revision_id,
            r.rule,
            audience.join(", ")
        );
    }
    Ok(())
}

/// The admin URL: `DATABASE_URL`, or the embedded cluster kept up by the returned guard.
fn admin_url(url: Option<&str>) -> Result<(String, Option<mesh_memory::pg::ClusterGuard>)> {
    Ok(match url {
        Some(url) => (url.to_owned(), None),
        None => {
            let guard = EmbeddedCluster::at_default_location()?.start_guarded()?;
            (guard.cluster().url()?, Some(guard))
        }
    })
}

/// What `eval locomo` was asked to do besides reading the data.
struct EvalRun<'a> {
    max_samples: Option<usize>,
    json_out: Option<&'a std::path::Path>,
    questions_out: Option<&'a std::path::Path>,
    keep: bool,
    config: mesh_memory::retrieval::RetrievalConfig,
    extra_hybrid: Vec<(String, mesh_memory::retrieval::RetrievalConfig)>,
}

async fn eval_locomo(url: Option<&str>, path: &std::path::Path, run: EvalRun<'_>) -> Result<()> {
    let EvalRun { max_samples, json_out, questions_out, keep, config, extra_hybrid } = run;
    use mesh_memory::evaluation;
    use std::io::Write;
    let samples = evaluation::dataset::read(path)?;
    let mut questions_file = match questions_out {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        )),
        None => None,
    };
    let mut write_error: Option<std::io::Error> = None;
    let mut write_question = |record: evaluation::QuestionRecord| {
        if let (Some(file), None) = (questions_file.as_mut(), &write_error) {
            let line = serde_json::to_string(&record).expect("a record serializes");
            if let Err(e) = writeln!(file, "{line}") {
                write_error = Some(e);
            }
        }
    };
    let (url, _guard) = admin_url(url)?;
    let admin: sqlx::postgres::PgConnectOptions = url.parse().context("parsing the database URL")?;
    let scratch = mesh_memory::database::ScratchDatabase::create(&admin, "mesh_eval", 8).await?;
    eprintln!("evaluating in scratch database {}", scratch.name);
    let options = evaluation::EvalOptions {
        config,
        embedder: match mesh_memory::semantic::embedder_from_env() {
            Ok(embedder) => Some(embedder),
            Err(err) => {
                eprintln!("semantic and hybrid variants unavailable: {err}");
                None
            }
        },
        vector_index: eval_vector_index(&scratch.name)?,
        max_samples,
        extra_hybrid,
    };
    let store = Store::new(scratch.pool.clone());
    let mut last_percent = usize::MAX;
    let recorder: Option<&mut dyn FnMut(evaluation::QuestionRecord)> = match questions_out {
        Some(_) => Some(&mut write_question),
        None => None,
    };
    let report = evaluation::run_locomo_recorded(
        &store,
        &samples,
        &options,
        |done, total| {
            let percent = done * 100 / total.max(1);
            if percent != last_percent && percent % 10 == 0 {
                eprintln!("  {done}/{total} queries ({percent}%)");
                last_percent = percent;
            }
        },
        recorder,
    )
    .await;
    if !keep {
        scratch.drop_database().await?;
    }
    let report = report?;
    if let Some(e) = write_error {
        return Err(e).context("writing --questions-out");
    }
    if let (Some(mut file), Some(path)) = (questions_file, questions_out) {
        file.flush().with_context(|| format!("writing {}", path.display()))?;
    }
    print!("{}", evaluation::render_table(&report));
    if let Some(path) = json_out {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// The evaluation's vector index from the environment (`MESH_VECTOR_INDEX`, `QDRANT_URL`): Qdrant
/// collections get the scratch database's name as their prefix, so runs never share points.
#[cfg_attr(not(feature = "qdrant"), allow(unused_variables))]
fn eval_vector_index(scratch: &str) -> Result<mesh_memory::semantic::VectorIndexChoice> {
    use mesh_memory::semantic::VectorIndexChoice;
    Ok(match VectorIndexChoice::from_env()? {
        #[cfg(feature = "qdrant")]
        VectorIndexChoice::Qdrant(config) => {
            eprintln!("vector index: Qdrant at {}", config.url);
            VectorIndexChoice::Qdrant(mesh_memory::semantic::qdrant::QdrantConfig {
                collection_prefix: scratch.to_owned(),
                ..config
            })
        }
        other => other,
    })
}

/// The bench's vector indexes by name, and the throwaway Qdrant servers they need (kept running
/// until the returned guards drop, after the run).
#[cfg(feature = "qdrant")]
async fn bench_indexes(
    names: &[String],
) -> Result<(Vec<mesh_memory::bench::BenchIndex>, Vec<mesh_memory::semantic::qdrant_server::QdrantCluster>)> {
    use mesh_memory::bench::BenchIndex;
    use mesh_memory::semantic::qdrant::QdrantConfig;
    use mesh_memory::semantic::qdrant_server::QdrantCluster;
    let (mut indexes, mut servers) = (Vec::new(), Vec::new());
    for name in names {
        let prefix = format!("mesh_bench_{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        let config = match name.as_str() {
            "pgvector" => {
                indexes.push(BenchIndex::PgVector);
                continue;
            }
            "qdrant" => match std::env::var("QDRANT_URL").ok().filter(|u| !u.is_empty()) {
                Some(_) => QdrantConfig { collection_prefix: prefix, ..QdrantConfig::from_env()? },
                None => {
                    let server = QdrantCluster::start(1, None).await?;
                    let config = QdrantConfig { collection_prefix: prefix, ..QdrantConfig::new(server.url()) };
                    servers.push(server);
                    config
                }
            },
            "qdrant-cluster" => {
                let cluster = QdrantCluster::start(3, None).await?;
                let config = QdrantConfig {
                    collection_prefix: prefix,
                    shards: Some(3),
                    replication_factor: Some(2),
                    ..QdrantConfig::new(cluster.url())
                };
                servers.push(cluster);
                config
            }
            other => anyhow::bail!("unknown vector index {other:?}; use pgvector, qdrant or qdrant-cluster"),
        };
        indexes.push(BenchIndex::Qdrant { label: name.clone(), config });
    }
    Ok((indexes, servers))
}

/// The bench's vector indexes by name (this build has pgvector only).
#[cfg(not(feature = "qdrant"))]
async fn bench_indexes(names: &[String]) -> Result<(Vec<mesh_memory::bench::BenchIndex>, Vec<()>)> {
    names
        .iter()
        .map(|name| match name.as_str() {
            "pgvector" => Ok(mesh_memory::bench::BenchIndex::PgVector),
            other => anyhow::bail!("vector index {other:?} needs a build with --features qdrant"),
        })
        .collect::<Result<Vec<_>>>()
        .map(|indexes| (indexes, Vec::new()))
}

async fn bench(
    url: Option<&str>,
    options: &mesh_memory::bench::BenchOptions,
    json_out: Option<&std::path::Path>,
) -> Result<()> {
    let (url, _guard) = admin_url(url)?;
    let admin: sqlx::postgres::PgConnectOptions = url.parse().context("parsing the database URL")?;
    let started = std::time::Instant::now();
    let report = mesh_memory::bench::run(&admin, options, |stage| {
        eprintln!("[{:>7.1}s] {stage}", started.elapsed().as_secs_f64());
    })
    .await?;
    print!("{}", mesh_memory::bench::render_table(&report));
    if let Some(path) = json_out {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Arguments of `recall`, gathered so the command function stays small.
struct RecallArgs {
    agent: String,
    conversation: String,
    actor: Option<String>,
    max_count: u32,
    token_budget: u32,
    prompt: bool,
    query: String,
}

/// The retriever every user-facing command runs: the default weights, and the semantic index and
/// audit digest key the environment configures (`mesh_memory::service`, the one constructor).
fn retriever_from_environment(store: &Store) -> Result<mesh_memory::retrieval::Retriever> {
    let setup =
        mesh_memory::service::RetrieverSetup::from_environment(mesh_memory::retrieval::RetrievalConfig::default());
    let configured = mesh_memory::service::configured_retriever(store, setup)?;
    if let Some(why) = &configured.semantic_unavailable {
        eprintln!("semantic search unavailable: {why}");
    }
    Ok(configured.retriever)
}

async fn recall(store: &Store, args: RecallArgs, json: bool) -> Result<()> {
    use mesh_memory::retrieval::{RetrievalMode, SearchRequest};
    let agent = store.find_runtime_agent(&args.agent).await?;
    let conversation = store.find_conversation(agent, &args.conversation).await?;
    let actor = match &args.actor {
        Some(text) => Some(store.find_actor(text).await?),
        None => None,
    };
    let mode = if args.prompt { RetrievalMode::Prompt } else { RetrievalMode::Recall };
    let request = SearchRequest {
        max_count: args.max_count,
        token_budget: args.token_budget,
        ..SearchRequest::new(agent, conversation, actor, args.query, mode)
    };
    let outcome = retriever_from_environment(store)?.search(&request).await?;
    if json {
        return print_json(&outcome);
    }
    let degraded: Vec<&str> = outcome.degradation_categories.iter().map(|c| c.as_str()).collect();
    println!(
        "retrieval event {}  audience: {} actor(s)  candidates: {}  cost: {}/{} tokens ({})  degraded: {}",
        outcome.event_id,
        outcome.context.audience().len(),
        outcome.candidate_count,
        outcome.cost_tokens,
        outcome.token_budget,
        outcome.cost_bound.as_str(),
        if degraded.is_empty() { "none".to_owned() } else { degraded.join(", ") }
    );
    if args.prompt {
        println!("\n{}", outcome.prompt_section());
    }
    if outcome.selections.is_empty() {
        println!("\nno memory selected");
    }
    for (rank, s) in outcome.selections.iter().enumerate() {
        println!(
            "\n{}. score {:.4}  entry {}  revision {} (#{})",
            rank + 1,
            s.score,
            s.entry_id,
            s.revision_id,
            s.revision_number
        );
        println!("   {}", mesh_memory::retrieval::render::prompt_line(s).trim_start_matches("- "));
        println!("   why: {}", s.reason);
    }
    for skipped in &outcome.skipped {
        println!(
            "\nskipped whole (not cut): entry {} revision {} costs {} tokens ({:?})",
            skipped.entry_id, skipped.revision_id, skipped.cost_tokens, skipped.reason
        );
    }
    if !outcome.withheld.is_empty() {
        let counts: Vec<String> = outcome.withheld.iter().map(|(rule, n)| format!("{rule}={n}")).collect();
        println!("\nwithheld full-text matches (counts only): {}", counts.join(", "));
    }
    Ok(())
}

/// `mesh-memory index run|rebuild|status`.
async fn index(store: &Store, action: IndexAction, json: bool) -> Result<()> {
    use mesh_memory::semantic::{self, IndexWorker, WorkerConfig};
    let pool = store.pool().clone();
    match action {
        IndexAction::Status => index_status(&pool, json).await,
        IndexAction::Rebuild { abandon: true } => {
            match semantic::abandon_rebuild(&pool).await? {
                Some(id) => println!("abandoned generation {id}; semantic search uses the active generation again"),
                None => println!("no rebuild in progress"),
            }
            Ok(())
        }
        IndexAction::Rebuild { abandon: false } => {
            let embedder = semantic::embedder_from_env()?;
            let backend = semantic::vector_backend(semantic::VectorIndexChoice::from_env()?, embedder.clone())?;
            let generation = semantic::rebuild_mirrored(&pool, embedder, backend.mirror, draw_progress).await?;
            eprintln!();
            println!(
                "generation {} ({}/{}, {} dimensions) is active",
                generation.id, generation.provider, generation.model, generation.dimension
            );
            Ok(())
        }
        IndexAction::Run { watch } => {
            let embedder = semantic::embedder_from_env()?;
            let backend = semantic::vector_backend(semantic::VectorIndexChoice::from_env()?, embedder.clone())?;
            let mut worker = IndexWorker::new(pool, embedder, WorkerConfig::default());
            if let Some(mirror) = backend.mirror {
                worker = worker.with_mirror(mirror);
            }
            if watch {
                eprintln!("indexing until Ctrl-C");
                worker.run_until(async { tokio::signal::ctrl_c().await.unwrap_or(()) }).await;
                return Ok(());
            }
            let report = worker.drain().await?;
            println!(
                "claimed {} outbox row(s): {} embedding(s) written, {} retirement(s), {} rescheduled, {} parked",
                report.claimed, report.embedded, report.retired, report.retried, report.gave_up
            );
            Ok(())
        }
    }
}

/// `mesh-memory qdrant start|url|stop`: the state file lives in MESH_QDRANT_DIR (default: a
/// directory in the system's temporary directory), the nodes' storage beside it.
#[cfg(feature = "qdrant")]
async fn qdrant(action: QdrantAction) -> Result<()> {
    use mesh_memory::semantic::qdrant_server::{ClusterState, QdrantCluster};
    let dir = std::env::var_os("MESH_QDRANT_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("mesh-memory-qdrant"));
    match action {
        QdrantAction::Start { nodes } => {
            if let Ok(running) = ClusterState::load(&dir) {
                anyhow::bail!(
                    "a throwaway Qdrant is already recorded in {} ({}); run `mesh-memory qdrant stop` first",
                    dir.display(),
                    running.nodes[0].grpc_url
                );
            }
            std::fs::create_dir_all(&dir)?;
            let cluster = QdrantCluster::start_detachable(nodes, Some(&dir)).await?;
            let state = cluster.detach();
            state.save(&dir)?;
            println!("{}", state.nodes[0].grpc_url);
        }
        QdrantAction::Url => println!("{}", ClusterState::load(&dir)?.nodes[0].grpc_url),
        QdrantAction::Stop => match ClusterState::load(&dir) {
            Ok(state) => {
                state.stop(&dir)?;
                println!("throwaway Qdrant stopped");
            }
            Err(_) => println!("no throwaway Qdrant was running"),
        },
    }
    Ok(())
}

/// A one-line progress bar on stderr, redrawn in place.
fn draw_progress(progress: mesh_memory::semantic::RebuildProgress) {
    const WIDTH: i64 = 30;
    let total = progress.total.max(1);
    let filled = (progress.embedded.min(total) * WIDTH / total) as usize;
    eprint!(
        "\rgeneration {} [{}{}] {}/{} ({}%)",
        progress.generation,
        "#".repeat(filled),
        ".".repeat(WIDTH as usize - filled),
        progress.embedded,
        progress.total,
        progress.embedded * 100 / total
    );
}

async fn index_status(pool: &sqlx::PgPool, json: bool) -> Result<()> {
    use mesh_memory::semantic;
    let generations = semantic::list_generations(pool).await?;
    let progress = semantic::rebuild_progress(pool).await?;
    let outbox = semantic::outbox_status(pool).await?;
    let pgvector = semantic::pgvector_available(pool).await?;
    if json {
        return print_json(&serde_json::json!({
            "pgvector": pgvector, "generations": generations, "rebuild": progress, "outbox": outbox,
        }));
    }
    println!("pgvector: {}", if pgvector { "installed" } else { "missing (semantic search unavailable)" });
    for g in &generations {
        println!(
            "generation {}  {:?}  {}/{} ({} dimensions, embeds {})  created {}",
            g.id, g.state, g.provider, g.model, g.dimension, g.document_form, g.created_at
        );
        if g.state == semantic::GenerationState::Active && g.document_form != semantic::DOCUMENT_FORM {
            println!(
                "  its vectors embed another text ({}) than this version writes ({}): semantic search is \
                 unavailable until `mesh-memory index rebuild`",
                g.document_form,
                semantic::DOCUMENT_FORM
            );
        }
    }
    if let Some(p) = progress {
        println!("rebuild of generation {}: {}/{} current revisions embedded", p.generation, p.embedded, p.total);
    }
    println!(
        "outbox: {} due, {} waiting to retry, {} parked, {} done",
        outbox.due, outbox.waiting, outbox.parked, outbox.done
    );
    Ok(())
}

async fn explain(
    store: &Store,
    id: &str,
    conversation: Option<&str>,
    agent: Option<&str>,
    event: bool,
    json: bool,
) -> Result<()> {
    if event {
        let event_id: mesh_memory::RetrievalEventId = id.parse()?;
        let explained = mesh_memory::retrieval::explain_event(store.pool(), event_id)
            .await?
            .with_context(|| format!("no retrieval event {event_id}"))?;
        if json {
            return print_json(&explained);
        }
        println!(
            "retrieval event {} ({:?}) at {}  degraded: {}",
            explained.event_id,
            explained.mode,
            explained.created_at.format("%Y-%m-%d %H:%M:%S"),
            explained.degradation_category.map_or("none", |c| c.as_str())
        );
        for (rank, s) in explained.selections.iter().enumerate() {
            let learned = s.learned_at.map(|t| format!("  learned {}", t.format("%Y-%m-%d %H:%M"))).unwrap_or_default();
            println!(
                "{}. score {:.4}  entry {}  revision {}{}\n   why: {}",
                rank + 1,
                s.score,
                s.entry_id,
                s.revision_id,
                learned,
                s.reason
            );
        }
        return Ok(());
    }
    let entry = store.find_entry(id).await?;
    let conversation = conversation.context("--conversation is required to explain an entry")?;
    let owner = store.entry_owner(entry).await?.with_context(|| format!("no entry {entry}"))?;
    let agent = match agent {
        Some(text) => store.find_runtime_agent(text).await?,
        None => owner,
    };
    let conversation = store.find_conversation(agent, conversation).await?;
    // One shape for both outputs, the one the console renders (`views::Explanation`).
    let explained = operator::explain(store, Some(agent), entry, conversation).await?;
    if json {
        return print_json(&explained);
    }
    println!("{explained}");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Agent turns: `turns`, `turn ID`, `chat`
// ---------------------------------------------------------------------------------------------

async fn turns(store: &Store, agent: Option<&str>, limit: u32, json: bool) -> Result<()> {
    let agent = match agent {
        Some(name) => Some(store.find_runtime_agent(name).await?),
        None => None,
    };
    let records = mesh_memory::turn::list_turns(store.pool(), agent, limit).await?;
    if json {
        return print_json(&records);
    }
    if records.is_empty() {
        println!("no turns recorded");
    }
    for r in &records {
        let writes: Vec<String> = r
            .ledger
            .writes
            .iter()
            .map(|w| format!("{:?} {}", w.operation, w.entry_id).to_lowercase())
            .chain(r.ledger.sharing_requests.iter().map(|q| format!("sharing request {}", q.request_id)))
            .collect();
        println!(
            "{}  {}  {:<18} rounds {}  {}",
            r.id,
            r.created_at.format("%Y-%m-%d %H:%M:%S"),
            r.outcome,
            r.rounds,
            if writes.is_empty() { "no writes".to_owned() } else { writes.join(", ") }
        );
    }
    Ok(())
}

async fn turn(store: &Store, id: mesh_memory::turn::TurnId, json: bool) -> Result<()> {
    let record = mesh_memory::turn::get_turn(store.pool(), id).await?.with_context(|| format!("no turn {id}"))?;
    if json {
        return print_json(&record);
    }
    println!("turn {}  outcome: {}  rounds: {}", record.id, record.outcome, record.rounds);
    println!("  conversation {}  inbound message {}", record.conversation_id, record.inbound_message_id);
    if let Some(outbound) = record.outbound_message_id {
        println!("  delivered as message {outbound}");
    }
    if let Some(reason) = &record.failure_reason {
        println!("  not delivered: {reason}");
    }
    println!("committed ledger (from the store's return values):");
    if record.ledger.is_empty() {
        println!("  (nothing committed)");
    }
    for w in &record.ledger.writes {
        let subject = if w.subject_changed { "  subject changed" } else { "" };
        println!(
            "  {:<7} entry {} -> revision {} (#{}){subject}",
            format!("{:?}", w.operation).to_lowercase(),
            w.entry_id,
            w.revision_id,
            w.revision_number
        );
    }
    for q in &record.ledger.sharing_requests {
        println!("  pending sharing request {} for revision {}", q.request_id, q.revision_id);
    }
    println!("tool calls:");
    if record.tool_calls.is_empty() {
        println!("  (none)");
    }
    for c in &record.tool_calls {
        let error = c.error.as_deref().map(|e| format!("  {e}")).unwrap_or_default();
        println!("  round {} {:<24} {}{error}", c.round, c.name, c.status);
    }
    if let Some(claims) = record.unbacked_claims.as_array().filter(|c| !c.is_empty()) {
        println!("claim guard: unbacked claims");
        for c in claims {
            println!("  {} ({})", c["kind"].as_str().unwrap_or("?"), c["phrase"].as_str().unwrap_or(""));
        }
    }
    if let Some(withheld) = &record.withheld {
        println!("delivery recheck withheld the reply: {}", serde_json::to_string(withheld)?);
    }
    println!("retrieval events (try `mesh-memory explain ID --event`):");
    for e in &record.retrieval_event_ids {
        println!("  {e}");
    }
    Ok(())
}

/// `mesh-memory mcp`: resolves and checks the binding, then serves it over stdio.
#[cfg(feature = "mcp")]
async fn mcp(store: &Store, agent: &str, conversation: &str, speaker: &str) -> Result<()> {
    let agent = store.find_runtime_agent(agent).await?;
    let conversation = store.find_conversation(agent, conversation).await?;
    let checked = operator::mcp_binding(store, agent, conversation, speaker)
        .await
        .with_context(|| format!("cannot bind the MCP session to {speaker:?}"))?;
    let binding = mesh_memory::mcp::McpBinding {
        agent,
        conversation,
        connector: checked.connector,
        external_id: checked.external_id,
    };
    eprintln!("mesh-memory MCP server on stdio, bound to {speaker} in {conversation}");
    mesh_memory::mcp::serve_stdio(retriever_from_environment(store)?, store.clone(), binding).await?;
    Ok(())
}

/// Signs in to the store's server as the operator's own login role, its password read from
/// MESH_OPERATOR_PASSWORD (never a command-line argument, which other users of the machine can
/// read).
#[cfg(feature = "mcp")]
async fn operator_session(store: &Store, role: &str) -> Result<operator::OperatorSession> {
    let password = std::env::var("MESH_OPERATOR_PASSWORD")
        .ok()
        .filter(|p| !p.is_empty())
        .context("set MESH_OPERATOR_PASSWORD to the operator role's password")?;
    let server = (*store.pool().connect_options()).clone();
    operator::OperatorSession::sign_in(&server, role, &password)
        .await
        .with_context(|| format!("cannot sign in as operator role {role:?}"))
}

/// `mesh-memory mcp token ...`.
#[cfg(feature = "mcp")]
async fn mcp_token(store: &Store, action: TokenAction, json: bool) -> Result<()> {
    match action {
        TokenAction::Create { agent, conversation, speaker, label } => {
            let agent = store.find_runtime_agent(&agent).await?;
            let conversation = store.find_conversation(agent, &conversation).await?;
            let issued = operator::issue_access_token(store, agent, conversation, &speaker, &label).await?;
            if json {
                return print_json(&serde_json::json!({"id": issued.id, "token": issued.secret}));
            }
            println!("token {} (shown once; only its hash is stored):\n{}", issued.id, issued.secret);
        }
        TokenAction::List { agent } => {
            let agent = match agent {
                Some(agent) => Some(store.find_runtime_agent(&agent).await?),
                None => None,
            };
            let tokens = store.list_access_tokens(agent).await?;
            if json {
                return print_json(&tokens);
            }
            for t in tokens {
                let state = match (t.revoked_at, t.last_used_at) {
                    (Some(at), _) => format!("revoked {}", at.format("%Y-%m-%d %H:%M")),
                    (None, Some(at)) => format!("last used {}", at.format("%Y-%m-%d %H:%M")),
                    (None, None) => "never used".to_owned(),
                };
                println!(
                    "{}  {} in {} as {}  created {}  {}  {}",
                    t.id,
                    t.agent_name,
                    t.conversation,
                    t.speaker,
                    t.created_at.format("%Y-%m-%d %H:%M"),
                    state,
                    t.label
                );
            }
        }
        TokenAction::Revoke { id, reason, operator: role } => {
            let id: uuid::Uuid = id.trim().parse().with_context(|| format!("{id:?} is not a token id"))?;
            let session = operator_session(store, &role).await?;
            let revoked = session.revoke_access_token(id, &reason).await;
            session.close().await;
            let revoked_by = revoked?;
            if json {
                return print_json(&serde_json::json!({"token_id": id, "revoked_by": revoked_by}));
            }
            println!("token {id} revoked by {revoked_by}");
        }
    }
    Ok(())
}

async fn chat(store: &Store, agent: &str, conversation: &str, speaker: &str) -> Result<()> {
    use std::io::BufRead;
    use std::sync::Arc;

    use mesh_memory::turn::{OpenAiCompatibleClient, OpenAiConfig, TurnEngine, TurnOutcome};

    let agent = store.find_runtime_agent(agent).await?;
    let conversation = store.find_conversation(agent, conversation).await?;
    let connector = store.conversation(agent, conversation).await?.connector;
    let client = OpenAiCompatibleClient::new(OpenAiConfig::from_env()?)?;
    let engine = TurnEngine::new(store.clone(), retriever_from_environment(store)?, Arc::new(client));
    eprintln!("chatting as {connector} {speaker}; /confirm REQUEST_ID confirms a sharing request, /quit ends");
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        if text == "/quit" {
            break;
        }
        let inbound = mesh_memory::turn::receive(store, agent, conversation, &connector, speaker, text).await?;
        if let Some(request) = text.strip_prefix("/confirm ") {
            let request: mesh_memory::privacy::sharing::SharingRequestId = request.parse()?;
            match mesh_memory::privacy::sharing::confirm_by_source_actor(store.pool(), request, inbound).await {
                Ok(mesh_memory::privacy::sharing::Confirmation::Granted { grant }) => {
                    println!("[grant {grant} created]")
                }
                Ok(mesh_memory::privacy::sharing::Confirmation::Recorded { missing }) => {
                    println!("[confirmation recorded; still waiting for {} other voice(s)]", missing.len())
                }
                Err(e) => println!("[not confirmed: {e}]"),
            }
            continue;
        }
        let report = engine.run_turn(inbound).await?;
        match (&report.outcome, &report.reply) {
            (TurnOutcome::Delivered { .. }, Some(reply)) => println!("{reply}"),
            (outcome, _) => println!("[turn {} not delivered: {}]", report.turn_id, outcome.name()),
        }
        for w in &report.ledger.writes {
            eprintln!("  [{:?} entry {} -> revision #{}]", w.operation(), w.entry_id(), w.revision_number());
        }
    }
    Ok(())
}
