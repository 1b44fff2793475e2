//! The `mesh-memory` command line: a thin layer over the core crate. Parsing and printing live
//! here; every decision lives in the library.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use mesh_memory::database::{self, OpenDatabase};
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
        /// Entry id.
        entry: String,
    },
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
enum DemoAction {
    /// Create the demo workspace (once).
    Seed,
}

#[tokio::main]
async fn main() -> ExitCode {
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
        Command::Show { entry } => {
            let entry: EntryId = entry.parse()?;
            with_store(cli.database_url.as_deref(), |store| async move { show(&store, entry, cli.json).await }).await
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
            "\nrevision {} ({}) {}  {}{}",
            r.revision_number,
            r.operation,
            r.id,
            r.created_at.format("%Y-%m-%d %H:%M"),
            current
        );
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
