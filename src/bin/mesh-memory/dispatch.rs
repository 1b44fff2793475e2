//! Maps each parsed command to the core: the store's reads, the operator layer
//! (`mesh_memory::operator`) for every operator action and read model, retrieval, the semantic
//! index, evaluation and the bench. What is shown, and whether as JSON or text, is `print`'s.

use anyhow::{Context, Result};
use mesh_memory::database::{self, OpenDatabase};
use mesh_memory::operator;
use mesh_memory::pg::EmbeddedCluster;
use mesh_memory::store::Store;
use mesh_memory::EntryId;

#[cfg(feature = "qdrant")]
use crate::args::QdrantAction;
use crate::args::{
    Cli, Command, DbAction, DemoAction, EraseAction, EraseConfirmation, EvalSuite, IndexAction, RoleAction,
};
#[cfg(feature = "mcp")]
use crate::args::{McpAction, TokenAction};
use crate::print;

/// Runs one parsed command.
pub(crate) async fn run(cli: Cli) -> Result<()> {
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
            query_model,
            json_out,
        } => {
            let (vector_indexes, _servers) = bench_indexes(&vector_index).await?;
            let query_model = match query_model {
                true => Some(mesh_memory::bench::QueryModel(
                    mesh_memory::semantic::embedder_from_env().context("--query-model needs an embedder")?,
                )),
                false => None,
            };
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
                query_model,
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
        Command::Mcp { action: Some(McpAction::DigestKey), .. } => mcp_digest_key(cli.json),
        #[cfg(feature = "mcp")]
        Command::Mcp { action: Some(McpAction::Token { action }), .. } => {
            with_store(cli.database_url.as_deref(), |store| async move { mcp_token(&store, action, cli.json).await })
                .await
        }
        #[cfg(feature = "mcp")]
        Command::Mcp { action: None, http: Some(addr), .. } => {
            with_serving_store(cli.database_url.as_deref(), |store| async move {
                let retriever = retriever_from_environment(&store)?;
                let listening = |bound| eprintln!("mesh-memory MCP server on http://{bound}/ (bearer tokens)");
                mesh_memory::mcp::serve_http(retriever, store.clone(), addr, listening).await?;
                Ok(())
            })
            .await
        }
        #[cfg(feature = "mcp")]
        Command::Mcp { action: None, http: None, agent, conversation, speaker, operator } => {
            let launch = match (agent, conversation, speaker, operator) {
                (Some(agent), Some(conversation), Some(speaker), Some(operator)) if !operator.trim().is_empty() => {
                    StdioLaunch::Vouched { agent, conversation, speaker, operator }
                }
                (None, None, None, _) => {
                    StdioLaunch::Token(std::env::var("MESH_MCP_TOKEN").ok().filter(|t| !t.trim().is_empty()).context(
                        "mcp on stdio needs an access token in MESH_MCP_TOKEN (an operator issues one with `mcp \
                         token create`), or --agent, --conversation, --as and --operator (or --http ADDR)",
                    )?)
                }
                _ => anyhow::bail!("a binding by arguments needs --agent, --conversation, --as and --operator"),
            };
            with_serving_store(cli.database_url.as_deref(), |store| async move { mcp(&store, launch).await }).await
        }
        Command::Chat { agent, conversation, speaker } => {
            with_store(cli.database_url.as_deref(), |store| async move {
                chat(&store, &agent, &conversation, &speaker).await
            })
            .await
        }
        Command::Erase { action } => {
            with_store(cli.database_url.as_deref(), |store| async move { erase(&store, action, cli.json).await }).await
        }
        Command::Role { action: RoleAction::Create { name, kind, print_sql } } => {
            create_role(cli.database_url.as_deref(), &name, kind.into(), print_sql, cli.json).await
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
/// whether or not `work` succeeded. A database whose schema is older than this binary opens
/// read-only: the reason is printed once to stderr, and a write the server refuses (SQLSTATE
/// 25006) is reported in the same words.
async fn with_store<F, Fut>(url: Option<&str>, work: F) -> Result<()>
where
    F: FnOnce(Store) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let db: OpenDatabase = database::open(url).await.context("opening the memory database")?;
    let read_only = db.read_only_reason();
    if let Some(reason) = &read_only {
        eprintln!("warning: {reason}");
    }
    let result = work(Store::new(db.pool.clone())).await;
    db.close().await;
    match (result, read_only) {
        (Err(err), Some(reason)) if database::is_read_only_refusal(err.as_ref()) => Err(anyhow::anyhow!(reason)),
        (result, _) => result,
    }
}

/// Runs `work` on the store an MCP server serves from. On DATABASE_URL the server runs as the
/// login its host was given (a member of mesh_runtime, which may not change the schema): the
/// schema handshake must find the database current (every call writes its record), otherwise
/// the server does not start and says why in the handshake's words (`db migrate` is the one
/// command that migrates a server). The embedded cluster opens as usual.
#[cfg(feature = "mcp")]
async fn with_serving_store<F, Fut>(url: Option<&str>, work: F) -> Result<()>
where
    F: FnOnce(Store) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let Some(url) = url else { return with_store(None, work).await };
    let pool = database::connect(url).await.context("connecting to DATABASE_URL")?;
    let result = async {
        let schema = database::check_schema(&pool).await.context("reading the schema's version")?;
        if let Some(refusal) = schema.refusal_for_writers() {
            anyhow::bail!(refusal);
        }
        work(Store::new(pool.clone())).await
    }
    .await;
    pool.close().await;
    result
}

/// `db migrate` on a server: the one command that changes a server database's schema. Refuses a
/// database a newer mesh-memory migrated, naming both versions.
async fn migrate_server(url: &str) -> Result<()> {
    let pool = database::connect(url).await.context("connecting to DATABASE_URL")?;
    let result = async {
        let schema = database::check_schema(&pool).await.context("reading the schema's version")?;
        if let (database::SchemaState::Newer { .. }, Some(refusal)) = (&schema, schema.refusal()) {
            anyhow::bail!(refusal);
        }
        database::migrate(&pool).await.context("applying migrations")?;
        print::line(match schema {
            database::SchemaState::Current => "migrations applied (the schema was already current)".to_owned(),
            database::SchemaState::Older { missing, .. } => format!("migrations applied ({} new)", missing.len()),
            _ => "migrations applied".to_owned(),
        });
        Ok(())
    }
    .await;
    pool.close().await;
    result
}

async fn db(action: DbAction, url: Option<&str>, json: bool) -> Result<()> {
    if let DbAction::Migrate = action {
        if let Some(url) = url {
            return migrate_server(url).await;
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
            print::line(if started { "embedded PostgreSQL started" } else { "embedded PostgreSQL already running" });
        }
        DbAction::Stop => {
            let stopped = cluster.stop()?;
            print::line(if stopped { "embedded PostgreSQL stopped" } else { "embedded PostgreSQL was not running" });
        }
        DbAction::Status => print::cluster_status(json, &cluster.status())?,
        DbAction::Migrate => {
            let guard = cluster.start_guarded()?;
            let pool = database::connect(&guard.cluster().url()?).await?;
            database::migrate(&pool).await.context("applying migrations")?;
            pool.close().await;
            print::line("migrations applied");
        }
        DbAction::Url => {
            print::line(cluster.url().context("the embedded cluster is not initialized; run `mesh-memory db start`")?)
        }
    }
    Ok(())
}

/// `role create`: a login role for one person, made as DATABASE_URL's administrator (or the
/// embedded cluster's), or its CREATE ROLE statement printed for one to run.
async fn create_role(
    url: Option<&str>,
    name: &str,
    kind: mesh_memory::store::ConsoleRoleKind,
    print_sql: bool,
    json: bool,
) -> Result<()> {
    let password = crate::password::new_role_password(name)?;
    if print_sql {
        let statement = operator::console_role_statement(name, &password, kind)?;
        print::line(format_args!("{statement};"));
        return Ok(());
    }
    let (url, _guard) = admin_url(url)?;
    let pool = database::connect(&url).await.context("connecting as the administrator")?;
    let created = operator::create_console_role(&pool, name, &password, kind).await;
    pool.close().await;
    created?;
    print::role_created(json, name, kind)
}

async fn demo_seed(store: &Store, json: bool) -> Result<()> {
    if mesh_memory::demo::is_seeded(store).await? {
        print::line(format_args!("demo workspace already seeded (runtime agent {:?})", mesh_memory::demo::DEMO_AGENT));
        return Ok(());
    }
    let workspace = mesh_memory::demo::seed(store).await.context("seeding the demo workspace")?;
    print::demo_workspace(json, &workspace)
}

async fn show(store: &Store, entry: EntryId, json: bool) -> Result<()> {
    let agent = store.entry_owner(entry).await?.with_context(|| format!("no entry {entry}"))?;
    let history = store.entry_history(agent, entry).await?.with_context(|| format!("no entry {entry}"))?;
    print::view(json, &history)
}

async fn repair(store: &Store, dry_run: bool, reason: &str, json: bool) -> Result<()> {
    let repaired = mesh_memory::privacy::repair::repair_audience_evidence(store.pool(), reason, dry_run).await?;
    print::repaired(json, &repaired, dry_run)
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
    let admin = database::connect_options(&url)?;
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
    print::table(&evaluation::render_table(&report));
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
    let admin = database::connect_options(&url)?;
    let started = std::time::Instant::now();
    let report = mesh_memory::bench::run(&admin, options, |stage| {
        eprintln!("[{:>7.1}s] {stage}", started.elapsed().as_secs_f64());
    })
    .await?;
    print::table(&mesh_memory::bench::render_table(&report));
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
    print::recall(json, &outcome, args.prompt)
}

/// `mesh-memory index run|rebuild|status`.
async fn index(store: &Store, action: IndexAction, json: bool) -> Result<()> {
    use mesh_memory::semantic::{self, IndexWorker, WorkerConfig};
    let pool = store.pool().clone();
    match action {
        IndexAction::Status => print::view(json, &mesh_memory::views::index_status(store).await?),
        IndexAction::Rebuild { abandon: true } => {
            match semantic::abandon_rebuild(&pool).await? {
                Some(id) => print::line(format_args!(
                    "abandoned generation {id}; semantic search uses the active generation again"
                )),
                None => print::line("no rebuild in progress"),
            }
            Ok(())
        }
        IndexAction::Rebuild { abandon: false } => {
            let embedder = semantic::embedder_from_env()?;
            let backend = semantic::vector_backend(semantic::VectorIndexChoice::from_env()?, embedder.clone())?;
            let generation = semantic::rebuild_mirrored(&pool, embedder, backend.mirror, print::progress).await?;
            eprintln!();
            print::line(format_args!(
                "generation {} ({}/{}, {} dimensions) is active",
                generation.id, generation.provider, generation.model, generation.dimension
            ));
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
            print::line(format_args!(
                "claimed {} outbox row(s): {} embedding(s) written, {} retirement(s), {} rescheduled, {} parked",
                report.claimed, report.embedded, report.retired, report.retried, report.gave_up
            ));
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
            print::line(&state.nodes[0].grpc_url);
        }
        QdrantAction::Url => print::line(&ClusterState::load(&dir)?.nodes[0].grpc_url),
        QdrantAction::Stop => match ClusterState::load(&dir) {
            Ok(state) => {
                state.stop(&dir)?;
                print::line("throwaway Qdrant stopped");
            }
            Err(_) => print::line("no throwaway Qdrant was running"),
        },
    }
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
        return print::view(json, &explained);
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
    print::view(json, &explained)
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
    print::rows(json, &records, |r| r.summary().to_string(), Some("no turns recorded"))
}

async fn turn(store: &Store, id: mesh_memory::turn::TurnId, json: bool) -> Result<()> {
    let record = mesh_memory::turn::get_turn(store.pool(), id).await?.with_context(|| format!("no turn {id}"))?;
    print::view(json, &record)
}

/// How `mesh-memory mcp` on stdio is bound.
#[cfg(feature = "mcp")]
enum StdioLaunch {
    /// By the access token in MESH_MCP_TOKEN.
    Token(String),
    /// By arguments, vouched for by a signed-in operator.
    Vouched { agent: String, conversation: String, speaker: String, operator: String },
}

/// `mesh-memory mcp`: resolves and checks the binding, then serves it over stdio.
#[cfg(feature = "mcp")]
async fn mcp(store: &Store, launch: StdioLaunch) -> Result<()> {
    use mesh_memory::mcp::{McpBinding, StdioBinding};
    let binding = match launch {
        StdioLaunch::Token(secret) => {
            eprintln!("mesh-memory MCP server on stdio, bound by its access token");
            StdioBinding::Token(secret)
        }
        StdioLaunch::Vouched { agent, conversation, speaker, operator: role } => {
            let agent = store.find_runtime_agent(&agent).await?;
            let conversation = store.find_conversation(agent, &conversation).await?;
            let session = operator_session(store, &role).await?;
            let checked = session.vouch_for_binding(agent, conversation, &speaker).await;
            session.close().await;
            let checked = checked.with_context(|| format!("cannot bind the MCP session to {speaker:?}"))?;
            eprintln!("mesh-memory MCP server on stdio, bound to {speaker} in {conversation} (vouched for by {role})");
            StdioBinding::Vouched(McpBinding {
                agent,
                conversation,
                connector: checked.connector,
                external_id: checked.external_id,
            })
        }
    };
    mesh_memory::mcp::serve_stdio(retriever_from_environment(store)?, store.clone(), binding).await?;
    Ok(())
}

/// `mesh-memory mcp digest-key`: the audit digest subkey of MESH_AGENT_MASTER_KEY, for a host's
/// MESH_AUDIT_DIGEST_KEY.
#[cfg(feature = "mcp")]
fn mcp_digest_key(json: bool) -> Result<()> {
    let key = mesh_memory::service::digest_key_from_master_key()?
        .context("set MESH_AGENT_MASTER_KEY: the digest key is derived from it")?;
    if json {
        return print::json(&serde_json::json!({"digest_key": key.to_hex()}));
    }
    print::line(key.to_hex());
    Ok(())
}

/// Signs in to the store's server as the operator's own login role, its password read from
/// MESH_OPERATOR_PASSWORD (never a command-line argument, which other users of the machine can
/// read).
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

/// `mesh-memory erase ...`: preview, then (unless `--dry-run`) erase as the operator's own role.
async fn erase(store: &Store, action: EraseAction, json: bool) -> Result<()> {
    use mesh_memory::erasure::{ErasureOptions, ErasureScope};
    let (scope, confirm) = match action {
        EraseAction::Verify { erasure } => {
            let id: uuid::Uuid = erasure.trim().parse().with_context(|| format!("{erasure:?} is not an erasure id"))?;
            let verified = operator::verify_erasure(store, id).await?;
            print::view(json, &verified)?;
            anyhow::ensure!(verified.is_clean(), "erasure {id} is not clean");
            return Ok(());
        }
        EraseAction::Entry { entry, confirm } => {
            (ErasureScope::Entry { entry: store.find_entry(&entry).await? }, confirm)
        }
        EraseAction::Person { person, agent, confirm } => {
            let actor = store.find_actor(&person).await?;
            let agent = match agent {
                Some(agent) => Some(store.find_runtime_agent(&agent).await?),
                None => None,
            };
            (ErasureScope::Person { actor, agent }, confirm)
        }
    };
    let EraseConfirmation { reason, dry_run, confirm: digest, operator: role } = confirm;
    if dry_run {
        let preview = operator::erasure_preview(store, &scope).await?;
        print::view(json, &preview)?;
        if !json {
            print::line(format_args!(
                "to erase exactly this, run the same command with --confirm {} --reason ... --operator ...",
                preview.confirmation
            ));
        }
        return Ok(());
    }
    let Some(digest) = digest else {
        anyhow::bail!(
            "an erasure needs --confirm DIGEST: run the same command with --dry-run, check what it shows, and pass \
             the confirmation digest it prints"
        );
    };
    let (Some(reason), Some(role)) = (reason, role) else {
        anyhow::bail!("an erasure needs --reason and --operator (or --dry-run)");
    };
    let session = operator_session(store, &role).await?;
    let erased = async {
        let preview = operator::erasure_preview(session.store(), &scope).await?;
        if preview.confirmation != digest.trim() {
            // The digest it reaches now is not shown: it is had only from a dry run, with its list.
            return Err(anyhow::Error::new(mesh_memory::erasure::ErasureError::ScopeChanged).context(format!(
                "MM011: nothing erased: --confirm {} is not the digest of what erasing {scope} reaches now; run \
                 --dry-run again and check what it shows",
                digest.trim()
            )));
        }
        if !json {
            print::line(&preview);
        }
        let options = ErasureOptions::from_environment()?;
        anyhow::Ok(session.erase(&scope, &preview.object_ids, &reason, &options).await?)
    }
    .await;
    session.close().await;
    print::view(json, &erased?)
}

/// `mesh-memory mcp token ...`.
#[cfg(feature = "mcp")]
async fn mcp_token(store: &Store, action: TokenAction, json: bool) -> Result<()> {
    match action {
        TokenAction::Create { agent, conversation, speaker, label, reason, operator: role, expires_in, expires_at } => {
            let now = chrono::Utc::now();
            let expires_at = operator::input::token_expiry(expires_in.as_deref(), expires_at.as_deref(), now)?;
            let agent = store.find_runtime_agent(&agent).await?;
            let conversation = store.find_conversation(agent, &conversation).await?;
            let request =
                operator::TokenBindingRequest { agent, conversation, external_id: &speaker, label: &label, expires_at };
            let session = operator_session(store, &role).await?;
            let issued = session.issue_access_token(&request, &reason).await;
            session.close().await;
            let issued = issued?;
            if json {
                return print::json(
                    &serde_json::json!({"id": issued.id, "token": issued.secret, "expires_at": issued.expires_at}),
                );
            }
            let expiry = match issued.expires_at {
                Some(at) => format!("expires {}", at.format("%Y-%m-%d %H:%M UTC")),
                None => "no expiry".to_owned(),
            };
            print::line(format_args!(
                "token {} ({expiry}; shown once, only its hash is stored):\n{}",
                issued.id, issued.secret
            ));
        }
        TokenAction::List { agent } => {
            let agent = match agent {
                Some(agent) => Some(store.find_runtime_agent(&agent).await?),
                None => None,
            };
            let tokens = operator::access_tokens(store, agent).await?;
            print::rows(json, &tokens, ToString::to_string, None)?;
        }
        TokenAction::Revoke { id, reason, operator: role } => {
            let id: uuid::Uuid = id.trim().parse().with_context(|| format!("{id:?} is not a token id"))?;
            let session = operator_session(store, &role).await?;
            let revoked = session.revoke_access_token(id, &reason).await;
            session.close().await;
            let revoked_by = revoked?;
            if json {
                return print::json(&serde_json::json!({"token_id": id, "revoked_by": revoked_by}));
            }
            print::line(format_args!("token {id} revoked by {revoked_by}"));
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
                    print::line(format_args!("[grant {grant} created]"))
                }
                Ok(mesh_memory::privacy::sharing::Confirmation::Recorded { missing }) => print::line(format_args!(
                    "[confirmation recorded; still waiting for {} other voice(s)]",
                    missing.len()
                )),
                Err(e) => print::line(format_args!("[not confirmed: {e}]")),
            }
            continue;
        }
        let report = engine.run_turn(inbound).await?;
        match (&report.outcome, &report.reply) {
            (TurnOutcome::Delivered { .. }, Some(reply)) => print::line(reply),
            (outcome, _) => print::line(format_args!("[turn {} not delivered: {}]", report.turn_id, outcome.name())),
        }
        for w in &report.ledger.writes {
            eprintln!("  [{:?} entry {} -> revision #{}]", w.operation(), w.entry_id(), w.revision_number());
        }
    }
    Ok(())
}
