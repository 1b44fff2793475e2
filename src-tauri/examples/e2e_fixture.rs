//! Test fixture of the console's end-to-end suite (scripts/test-console.sh). It works through the
//! real core APIs, never by writing rows by hand:
//!
//! - `seed`: the demo workspace (`demo::seed`), plus what the walkthrough needs whatever else the
//!   demo holds: a real audited retrieval (`retrieval::search`), pending sharing requests made
//!   under an authenticated direct message (`privacy::sharing::create_request`; three of them for
//!   the stale-approval checks), two memories from a conversation of unknown topology (unknown
//!   audience evidence, for evidence review), an MCP access token for Priya in #engineering
//!   (`OperatorSession::issue_access_token`, as `mesh-memory mcp token create` issues it, by an
//!   operator role made for it and dropped again) and a browse-only
//!   login role. Prints the ids as JSON.
//!   (No second operator yet: the console's first run must still find no operator role.)
//! - `grant <request-id>`: prints the grant of that request as JSON (role recorded, audience).
//! - `request <request-id>`: what a decision wrote for that request: its state and decider, its
//!   grants and the operator actions logged on it.
//! - `amend <entry-id>` / `forget <entry-id>`: amend (as its subject) or forget an entry, making
//!   requests for its revision stale while the console shows them.
//! - `approve-as-other-operator <request-id>`: a second operator role (created on first use)
//!   approves first.
//! - `evidence <revision-id>`: every source of that revision with its evidence, its basis and the
//!   operator actions logged on it.
//! - `token <token-id>`: whether that access token is revoked and the operator actions logged on
//!   it (role, action, reason).
//! - `expire-role <role>` / `restore-role <role>`: expire a login role's password and end its
//!   connections (the console's session ends under the operator), or make it valid again.
//! - `grant-eraser <role>`: `GRANT mesh_eraser TO <role>`, as an administrator gives an operator
//!   the right to erase (the console's next sign-in as the role may erase).
//! - `erasure <entry-id> <actor-id>`: the bodies of that entry's revisions, and the `erase`
//!   operator actions logged on that entry or person (role and reason).
//! - `browse-timing`: times memory-browser pages (first, deep keyset, each filter) on whatever
//!   the database holds, for the scale check at a million revisions.
//!
//! Uses `DATABASE_URL`, or the embedded default cluster when it is unset.

use mesh_memory::database;
use mesh_memory::privacy::sharing::{self, NewSharingRequest};
use mesh_memory::retrieval::{self, RetrievalConfig, RetrievalMode, SearchRequest};
use mesh_memory::store::{
    Amendment, ConsoleRoleKind, Direction, NewConversation, NewMemory, NewMessage, Restriction, SourceRef, Store,
    SubjectUpdate, Topology,
};
use mesh_memory::{ActorId, AgentId, ConversationId, EntryId, MessageId};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn find<T: Copy>(list: &[(String, T)], name: &str) -> Result<T> {
    list.iter().find(|(n, _)| n.starts_with(name)).map(|(_, id)| *id).ok_or_else(|| format!("demo lacks {name}").into())
}

async fn seed(store: &Store, admin: &sqlx::PgPool) -> Result<serde_json::Value> {
    let demo = mesh_memory::demo::seed(store).await?;
    let engineering = find(&demo.conversations, "engineering")?;
    let dm_alex_kim = find(&demo.conversations, "dm-alex-kim")?;
    let victor = find(&demo.actors, "U123")?;
    let alex_kim = find(&demo.actors, "U790")?;
    let paging = find(&demo.entries, "paging-preference")?;
    let amended = find(&demo.entries, "amended-team")?;

    let config = RetrievalConfig::default();
    let request =
        SearchRequest::new(demo.agent, engineering, Some(victor), "tabs indentation team", RetrievalMode::Prompt);
    let event = retrieval::search(store, &config, &request).await?.event_id;

    let identity = store.resolve_identity("slack", "U790").await?;
    let ask = store
        .record_message(NewMessage {
            agent: demo.agent,
            conversation: dm_alex_kim,
            direction: Direction::Inbound,
            sender: alex_kim,
            sender_identity: identity.map(|i| i.0),
            body: "Please tell #engineering to page me on Slack, never by phone.",
            sent_at: chrono::Utc::now(),
        })
        .await?;
    let paging_history = store.entry_history(demo.agent, paging).await?.ok_or("paging entry vanished")?;
    let request_id = sharing::create_request(
        store,
        NewSharingRequest {
            agent: demo.agent,
            via_message: ask,
            revision: paging_history.current_revision_id,
            target_conversation: engineering,
            rationale: "Alex asked me to let #engineering know how to page them.".into(),
        },
    )
    .await?;

    let bridged = store
        .create_conversation(NewConversation {
            agent: demo.agent,
            connector: "email",
            external_channel_id: "thread-4711",
            topology: Topology::Unknown,
            title: "Forwarded email thread",
        })
        .await?;
    let forwarded = store
        .record_message(NewMessage {
            agent: demo.agent,
            conversation: bridged,
            direction: Direction::Inbound,
            sender: victor,
            sender_identity: None,
            body: "FYI the Q3 budget review moved to Thursday.",
            sent_at: chrono::Utc::now(),
        })
        .await?;
    let withheld = store
        .create_entry(NewMemory {
            agent: demo.agent,
            body: "The Q3 budget review moved to Thursday.".into(),
            subject: None,
            source_actor: Some(victor),
            origin_conversation: Some(bridged),
            always_on: false,
            restriction: Restriction::None,
            sources: vec![SourceRef::Message(forwarded)],
        })
        .await?;

    // A second forwarded note, still waiting for review when the read-only reviewer looks.
    let forwarded_later = store
        .record_message(NewMessage {
            agent: demo.agent,
            conversation: bridged,
            direction: Direction::Inbound,
            sender: victor,
            sender_identity: None,
            body: "Also: the offsite moved to Lisbon.",
            sent_at: chrono::Utc::now(),
        })
        .await?;
    let still_withheld = store
        .create_entry(NewMemory {
            agent: demo.agent,
            body: "The team offsite moved to Lisbon.".into(),
            subject: None,
            source_actor: Some(victor),
            origin_conversation: Some(bridged),
            always_on: false,
            restriction: Restriction::None,
            sources: vec![SourceRef::Message(forwarded_later)],
        })
        .await?;

    // Three more requests from Alex's direct messages: amended, forgotten and decided by another
    // operator while the console still shows them pending.
    let alex = AlexDm { agent: demo.agent, dm: dm_alex_kim, alex: alex_kim, identity: identity.map(|i| i.0) };
    let mut stale = serde_json::Map::new();
    for (name, body) in [
        ("amended", "Alex is out of office next Friday."),
        ("forgotten", "Alex moved desks to the third floor."),
        ("decided_elsewhere", "Alex prefers meetings before noon."),
    ] {
        let (entry, request) = alex.shared_memory(store, body, engineering).await?;
        stale.insert(name.into(), serde_json::json!({ "entry": entry.to_string(), "request": request.to_string() }));
    }

    // An MCP access token, issued as `mcp token create` issues it: by an operator, with a reason
    // the database records (a role made for this and dropped again, so that the console's first
    // run still finds no operator role); the console revokes it.
    let token = issue_token(admin, demo.agent, engineering).await?;

    let reader_password = "reader-password-e2e";
    mesh_memory::store::create_console_role(admin, "console_reader", reader_password, ConsoleRoleKind::Reader).await?;

    Ok(serde_json::json!({
        "agent": demo.agent.to_string(),
        "amended_entry": amended.to_string(),
        "engineering": engineering.to_string(),
        "event_id": event.to_string(),
        "request_id": request_id.to_string(),
        "withheld_entry": withheld.entry_id().to_string(),
        "withheld_revision": withheld.revision_id().to_string(),
        "still_withheld_revision": still_withheld.revision_id().to_string(),
        "victor": victor.to_string(),
        "alex": alex_kim.to_string(),
        "stale": stale,
        "token_id": token.id.to_string(),
        "token_issue": format!("{TOKEN_ISSUER}:issue_access_token:{TOKEN_ISSUE_REASON}"),
        "reader_role": "console_reader",
        "reader_password": reader_password,
        "other_operator": OTHER_OPERATOR,
    }))
}

/// The role that issues the fixture's token (dropped again once it has).
const TOKEN_ISSUER: &str = "fixture_token_issuer";
/// The reason recorded with that issue.
const TOKEN_ISSUE_REASON: &str = "Priya's Claude Desktop (e2e fixture)";

/// Priya's token in #engineering, issued through the operator layer by [`TOKEN_ISSUER`].
async fn issue_token(
    admin: &sqlx::PgPool,
    agent: AgentId,
    conversation: ConversationId,
) -> Result<mesh_memory::store::IssuedToken> {
    use mesh_memory::operator::{self, OperatorSession, TokenBindingRequest};
    let password = "issuer-password-e2e";
    operator::create_console_role(admin, TOKEN_ISSUER, password, ConsoleRoleKind::Operator).await?;
    let server = (*admin.connect_options()).clone();
    let issuer = OperatorSession::sign_in(&server, TOKEN_ISSUER, password).await?;
    let request = TokenBindingRequest {
        agent,
        conversation,
        external_id: "U456",
        label: "Priya's laptop (Claude Desktop)",
        expires_at: None,
    };
    let issued = issuer.issue_access_token(&request, TOKEN_ISSUE_REASON).await;
    issuer.close().await;
    // The name is a constant of this file.
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP ROLE {TOKEN_ISSUER}"))).execute(admin).await?;
    Ok(issued?)
}

/// Alex Kim's authenticated direct conversation with the agent.
struct AlexDm {
    agent: AgentId,
    dm: ConversationId,
    alex: ActorId,
    identity: Option<mesh_memory::IdentityId>,
}

impl AlexDm {
    async fn says(&self, store: &Store, body: &str) -> Result<MessageId> {
        Ok(store
            .record_message(NewMessage {
                agent: self.agent,
                conversation: self.dm,
                direction: Direction::Inbound,
                sender: self.alex,
                sender_identity: self.identity,
                body,
                sent_at: chrono::Utc::now(),
            })
            .await?)
    }

    /// A memory Alex told the agent directly, and Alex's pending request to share it in `target`.
    async fn shared_memory(
        &self,
        store: &Store,
        body: &str,
        target: ConversationId,
    ) -> Result<(EntryId, sharing::SharingRequestId)> {
        let told = self.says(store, body).await?;
        let memory = store
            .create_entry(NewMemory {
                agent: self.agent,
                body: body.into(),
                subject: Some(self.alex),
                source_actor: Some(self.alex),
                origin_conversation: Some(self.dm),
                always_on: false,
                restriction: Restriction::None,
                sources: vec![SourceRef::Message(told)],
            })
            .await?;
        let ask = self.says(store, "Please let #engineering know that too.").await?;
        let request = sharing::create_request(
            store,
            NewSharingRequest {
                agent: self.agent,
                via_message: ask,
                revision: memory.revision_id(),
                target_conversation: target,
                rationale: "Alex asked me to tell #engineering.".into(),
            },
        )
        .await?;
        Ok((memory.entry_id(), request))
    }
}

/// What decisions wrote for a request: state, decider, grants and logged operator actions.
async fn request_record(admin: &sqlx::PgPool, request: &str) -> Result<serde_json::Value> {
    let request: uuid::Uuid = request.parse()?;
    let (state, decided_by, grants, actions): (String, Option<String>, i64, Vec<String>) = sqlx::query_as(
        "SELECT q.state::text, q.decided_by,
                (SELECT count(*) FROM sharing_grants g WHERE g.request_id = q.id),
                coalesce((SELECT array_agg(o.role_name || ':' || o.action ORDER BY o.id) FROM operator_actions o
                           WHERE o.target_id = q.id), '{}')
           FROM sharing_requests q WHERE q.id = $1",
    )
    .bind(request)
    .fetch_one(admin)
    .await?;
    Ok(serde_json::json!({ "state": state, "decided_by": decided_by, "grants": grants, "operator_actions": actions }))
}

/// Amends an entry (a new body, as its subject said it) so requests for the old revision are stale.
async fn amend(store: &Store, entry: &str) -> Result<serde_json::Value> {
    let entry = EntryId(entry.parse()?);
    let agent = store.entry_owner(entry).await?.ok_or("no such entry")?;
    let history = store.entry_history(agent, entry).await?.ok_or("no such entry")?;
    let current = history.revisions.last().ok_or("entry without revisions")?;
    let outcome = store
        .amend_entry(Amendment {
            agent,
            entry,
            expected_revision: history.current_revision_id,
            body: Some(format!("{} (corrected)", current.body)),
            subject: SubjectUpdate::Keep,
            source_actor: current.source_actor,
            sources: vec![],
        })
        .await?;
    Ok(serde_json::json!({ "amended": format!("{outcome:?}") }))
}

/// Forgets an entry.
async fn forget(store: &Store, entry: &str) -> Result<serde_json::Value> {
    let entry = EntryId(entry.parse()?);
    let agent = store.entry_owner(entry).await?.ok_or("no such entry")?;
    let outcome = store.forget_entry(agent, entry).await?;
    Ok(serde_json::json!({ "forgotten": format!("{outcome:?}") }))
}

/// The second operator's login role, and its password (a test fixture's).
const OTHER_OPERATOR: &str = "ops_bob";
const OTHER_OPERATOR_PASSWORD: &str = "other-operator-password-e2e";

/// Another operator approves a request through their own login role (created on first use).
async fn approve_as_other_operator(admin: &sqlx::PgPool, request: &str) -> Result<serde_json::Value> {
    let request = sharing::SharingRequestId(request.parse()?);
    let role = mesh_memory::store::create_console_role(
        admin,
        OTHER_OPERATOR,
        OTHER_OPERATOR_PASSWORD,
        ConsoleRoleKind::Operator,
    )
    .await;
    if let Err(err) = role {
        if !matches!(err, mesh_memory::store::StoreError::AlreadyExists { .. }) {
            return Err(err.into());
        }
    }
    let options = admin.connect_options();
    let pool = mesh_memory::store::connect_as(&options, OTHER_OPERATOR, OTHER_OPERATOR_PASSWORD).await?;
    let grant = sharing::approve_as_operator(&pool, request, "Confirmed with Alex by phone.").await;
    pool.close().await;
    Ok(serde_json::json!({ "grant": grant?.to_string() }))
}

/// A source's id, evidence state, basis, audience and the operator actions logged on it.
type SourceEvidenceRow = (String, String, String, Vec<String>, Vec<String>);

/// Every source of a revision: evidence state, basis, audience and operator actions logged on it.
async fn evidence(admin: &sqlx::PgPool, revision: &str) -> Result<serde_json::Value> {
    let revision: uuid::Uuid = revision.parse()?;
    let rows: Vec<SourceEvidenceRow> = sqlx::query_as(
        "SELECT s.id::text, s.evidence::text, s.evidence_basis,
                coalesce((SELECT array_agg(a::text ORDER BY a) FROM unnest(s.audience) a), '{}'),
                coalesce((SELECT array_agg(o.role_name || ':' || o.action ORDER BY o.id) FROM operator_actions o
                           WHERE o.target_id = s.id), '{}')
           FROM revision_sources s WHERE s.revision_id = $1 ORDER BY s.created_at, s.id",
    )
    .bind(revision)
    .fetch_all(admin)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, evidence, basis, audience, actions)| {
            serde_json::json!({ "source": id, "evidence": evidence, "basis": basis, "audience": audience,
                                "operator_actions": actions })
        })
        .collect())
}

/// An access token's revocation time and the operator actions logged on it.
async fn token(admin: &sqlx::PgPool, token: &str) -> Result<serde_json::Value> {
    let token: uuid::Uuid = token.parse()?;
    let (revoked_at, actions): (Option<String>, Vec<String>) = sqlx::query_as(
        "SELECT t.revoked_at::text,
                coalesce((SELECT array_agg(o.role_name || ':' || o.action || ':' || o.reason ORDER BY o.id)
                            FROM operator_actions o
                           WHERE o.target_kind = 'mcp_access_token' AND o.target_id = t.id), '{}')
           FROM mcp_access_tokens t WHERE t.id = $1",
    )
    .bind(token)
    .fetch_one(admin)
    .await?;
    Ok(serde_json::json!({ "revoked_at": revoked_at, "operator_actions": actions }))
}

async fn grant(admin: &sqlx::PgPool, request: &str) -> Result<serde_json::Value> {
    let request: uuid::Uuid = request.parse()?;
    let row: Option<(String, String, Vec<String>, String)> = sqlx::query_as(
        "SELECT g.approved_by_role, g.authority::text,
                coalesce(array_agg(a.actor_id::text ORDER BY a.actor_id) FILTER (WHERE a.actor_id IS NOT NULL), '{}'),
                (SELECT o.role_name FROM operator_actions o
                  WHERE o.target_id = g.request_id AND o.action = 'approve_sharing' ORDER BY o.id DESC LIMIT 1)
           FROM sharing_grants g LEFT JOIN sharing_grant_audience a ON a.grant_id = g.id
          WHERE g.request_id = $1 AND g.revoked_at IS NULL
          GROUP BY g.id",
    )
    .bind(request)
    .fetch_optional(admin)
    .await?;
    Ok(match row {
        Some((role, authority, audience, logged_role)) => serde_json::json!({
            "approved_by_role": role, "authority": authority, "audience": audience, "operator_log_role": logged_role,
        }),
        None => serde_json::Value::Null,
    })
}

async fn browse_timing(store: &Store) -> Result<serde_json::Value> {
    use mesh_memory::store::{BrowseFilter, EntryState};
    let agent = store.list_runtime_agents().await?.first().map(|a| a.id);
    let subject = store.list_subjects(None).await?.first().map(|a| a.id);
    let cases: Vec<(&str, BrowseFilter)> = vec![
        ("all", BrowseFilter::default()),
        ("agent", BrowseFilter { agent, ..Default::default() }),
        ("agent+forgotten", BrowseFilter { agent, state: Some(EntryState::Forgotten), ..Default::default() }),
        ("subject", BrowseFilter { subject, ..Default::default() }),
        ("text", BrowseFilter { text: Some("gadget".into()), ..Default::default() }),
        ("rare text", BrowseFilter { text: Some("\"fact 424242\"".into()), ..Default::default() }),
    ];
    let mut out = serde_json::Map::new();
    for (name, filter) in cases {
        let started = std::time::Instant::now();
        let mut page = store.browse_entries(&filter, None, 50).await?;
        let first_ms = started.elapsed().as_secs_f64() * 1000.0;
        let mut pages = 1;
        let deep = std::time::Instant::now();
        while pages < 20 {
            let Some(after) = page.next_after else { break };
            page = store.browse_entries(&filter, Some(after), 50).await?;
            pages += 1;
        }
        let per_page_ms = deep.elapsed().as_secs_f64() * 1000.0 / f64::from((pages - 1).max(1));
        out.insert(
            name.into(),
            serde_json::json!({ "first_page_ms": first_ms, "later_pages_ms_each": per_page_ms, "pages": pages }),
        );
    }
    let started = std::time::Instant::now();
    mesh_memory::privacy::repair::evidence_review(store, None, None, 50).await?;
    out.insert("evidence_review_ms".into(), (started.elapsed().as_secs_f64() * 1000.0).into());
    Ok(out.into())
}

/// What an administrator does to end a console session: the role's password expires (`VALID
/// UNTIL` in the past) and its open connections are terminated, so the console's next connection
/// is refused. `expired = false` restores it (`VALID UNTIL 'infinity'`).
async fn expire_role(admin: &sqlx::PgPool, role: &str, expired: bool) -> Result<serde_json::Value> {
    let until = if expired { "2000-01-01" } else { "infinity" };
    let (statement,): (String,) = sqlx::query_as("SELECT format('ALTER ROLE %I VALID UNTIL %L', $1::text, $2::text)")
        .bind(role)
        .bind(until)
        .fetch_one(admin)
        .await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(statement)).execute(admin).await?;
    let ended: i64 = if expired {
        sqlx::query_scalar(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1) t",
        )
        .bind(role)
        .fetch_one(admin)
        .await?
    } else {
        0
    };
    Ok(serde_json::json!({ "role": role, "valid_until": until, "connections_ended": ended }))
}

/// What an administrator does to let an operator erase: `GRANT mesh_eraser TO <role>`.
async fn grant_eraser(admin: &sqlx::PgPool, role: &str) -> Result<serde_json::Value> {
    let (statement,): (String,) =
        sqlx::query_as("SELECT format('GRANT mesh_eraser TO %I', $1::text)").bind(role).fetch_one(admin).await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(statement)).execute(admin).await?;
    Ok(serde_json::json!({ "role": role, "granted": "mesh_eraser" }))
}

/// The bodies of an entry's revisions, and the `erase` operator actions logged on the entry or on
/// a person (`role:scope:reason`).
async fn erasure(admin: &sqlx::PgPool, entry: &str, person: &str) -> Result<serde_json::Value> {
    let entry: uuid::Uuid = entry.parse()?;
    let person: uuid::Uuid = person.parse()?;
    let bodies: Vec<String> =
        sqlx::query_scalar("SELECT body FROM memory_entry_revisions WHERE entry_id = $1 ORDER BY revision_number")
            .bind(entry)
            .fetch_all(admin)
            .await?;
    let actions: Vec<String> = sqlx::query_scalar(
        "SELECT o.role_name || ':' || o.target_kind || ':' || o.reason FROM operator_actions o
          WHERE o.action = 'erase' AND o.target_id = ANY($1) ORDER BY o.id",
    )
    .bind(vec![entry, person])
    .fetch_all(admin)
    .await?;
    Ok(serde_json::json!({ "bodies": bodies, "operator_actions": actions }))
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let url = std::env::var("DATABASE_URL").ok().filter(|u| !u.is_empty());
    let db = database::open(url.as_deref()).await?;
    let store = Store::new(db.pool.clone());
    let output = match args.first().map(String::as_str) {
        Some("seed") => seed(&store, &db.pool).await,
        Some("browse-timing") => browse_timing(&store).await,
        Some("grant") => grant(&db.pool, args.get(1).ok_or("grant needs a request id")?).await,
        Some("request") => request_record(&db.pool, args.get(1).ok_or("request needs a request id")?).await,
        Some("amend") => amend(&store, args.get(1).ok_or("amend needs an entry id")?).await,
        Some("forget") => forget(&store, args.get(1).ok_or("forget needs an entry id")?).await,
        Some("approve-as-other-operator") => {
            approve_as_other_operator(&db.pool, args.get(1).ok_or("approve-as-other-operator needs a request id")?)
                .await
        }
        Some("evidence") => evidence(&db.pool, args.get(1).ok_or("evidence needs a revision id")?).await,
        Some("token") => token(&db.pool, args.get(1).ok_or("token needs a token id")?).await,
        Some("expire-role") => expire_role(&db.pool, args.get(1).ok_or("expire-role needs a role")?, true).await,
        Some("restore-role") => expire_role(&db.pool, args.get(1).ok_or("restore-role needs a role")?, false).await,
        Some("grant-eraser") => grant_eraser(&db.pool, args.get(1).ok_or("grant-eraser needs a role")?).await,
        Some("erasure") => {
            let entry = args.get(1).ok_or("erasure needs an entry id and a person id")?;
            erasure(&db.pool, entry, args.get(2).ok_or("erasure needs an entry id and a person id")?).await
        }
        _ => Err("usage: e2e_fixture seed | grant <request-id> | request <request-id> | amend <entry-id> \
                  | forget <entry-id> | approve-as-other-operator <request-id> | evidence <revision-id> \
                  | token <token-id> | expire-role <role> | restore-role <role> | grant-eraser <role> \
                  | erasure <entry-id> <person-id> | browse-timing"
            .into()),
    };
    db.close().await;
    println!("{}", serde_json::to_string(&output?)?);
    Ok(())
}
