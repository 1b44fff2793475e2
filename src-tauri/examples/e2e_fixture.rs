//! Test fixture of the console's end-to-end suite (scripts/test-console.sh). It works through the
//! real core APIs, never by writing rows by hand:
//!
//! - `seed`: the demo workspace (`demo::seed`), plus what the walkthrough needs whatever else the
//!   demo holds: a real audited retrieval (`retrieval::search`), a pending sharing request made
//!   under an authenticated direct message (`privacy::sharing::create_request`), a memory from a
//!   conversation of unknown topology (unknown audience evidence, for evidence review), and a
//!   browse-only login role. Prints the ids as JSON.
//! - `grant <request-id>`: prints the grant of that request as JSON (role recorded, audience).
//! - `browse-timing`: times memory-browser pages (first, deep keyset, each filter) on whatever
//!   the database holds, for the scale check at a million revisions.
//!
//! Uses `DATABASE_URL`, or the embedded default cluster when it is unset.

use mesh_memory::database;
use mesh_memory::privacy::sharing::{self, NewSharingRequest};
use mesh_memory::retrieval::{self, RetrievalConfig, RetrievalMode, SearchRequest};
use mesh_memory::store::{
    ConsoleRoleKind, Direction, NewConversation, NewMemory, NewMessage, Restriction, SourceRef, Store, Topology,
};

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

    let reader_password = "reader-password-e2e";
    mesh_memory::store::create_console_role(admin, "console_reader", reader_password, ConsoleRoleKind::Reader).await?;

    Ok(serde_json::json!({
        "agent": demo.agent.to_string(),
        "amended_entry": amended.to_string(),
        "engineering": engineering.to_string(),
        "event_id": event.to_string(),
        "request_id": request_id.to_string(),
        "withheld_entry": withheld.entry_id.to_string(),
        "reader_role": "console_reader",
        "reader_password": reader_password,
    }))
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
    store.evidence_review(None, None, 50).await?;
    out.insert("evidence_review_ms".into(), (started.elapsed().as_secs_f64() * 1000.0).into());
    Ok(out.into())
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
        _ => Err("usage: e2e_fixture seed | grant <request-id>".into()),
    };
    db.close().await;
    println!("{}", serde_json::to_string(&output?)?);
    Ok(())
}
