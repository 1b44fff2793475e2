//! `demo seed` runs real turns through the engine: it leaves retrieval events, ledgers, a
//! failed claim-guard turn, a pending sharing request and an `eligibility_withheld_unknown`
//! event, and `mesh-memory turns` / `mesh-memory turn ID` print them.

mod common;

use std::process::Command;

use mesh_memory::privacy::sharing::{SharingRequestId, SharingState};
use mesh_memory::store::WriteOperation;
use mesh_memory::turn::{get_turn, list_turns};

fn cli() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mesh-memory"));
    cmd.env_remove("MESH_LOG");
    cmd
}

#[tokio::test]
async fn demo_seed_runs_real_turns() {
    let db = common::test_db().await;
    let workspace = mesh_memory::demo::seed(&db.store).await.unwrap();
    let outcomes: Vec<(&str, &str)> = workspace.turns.iter().map(|t| (t.name.as_str(), t.outcome.as_str())).collect();
    assert_eq!(
        outcomes,
        vec![
            ("answer from retrieved memory", "delivered"),
            ("recall then amend", "delivered"),
            ("production incident: claim guard", "claim_guard_failed"),
            ("sharing request (pending)", "delivered"),
            ("withheld: unknown audience", "delivered"),
        ]
    );
    // The default allowance holds the memories, not their ranking data: no prompt of the demo
    // skipped an eligible memory for lack of room.
    let prompts: Vec<(i32, i32, i64)> = sqlx::query_as(
        "SELECT cost_tokens, token_budget, jsonb_array_length(skipped_oversized)::bigint
           FROM memory_retrieval_events WHERE runtime_agent_id = $1 AND mode = 'prompt'",
    )
    .bind(workspace.agent)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert!(!prompts.is_empty());
    for (cost, budget, skipped) in prompts {
        assert_eq!((budget, skipped), (4096, 0), "a demo prompt skipped memories (cost {cost})");
        assert!(cost < budget / 2, "the demo's memories fill under half of the allowance: {cost}");
    }

    let turns = list_turns(&db.pool, Some(workspace.agent), 50).await.unwrap();
    assert_eq!(turns.len(), 5);
    assert!(turns.iter().all(|t| !t.retrieval_event_ids.is_empty()), "every turn leaves a retrieval event");

    let amend = get_turn(&db.pool, workspace.turns[1].turn_id).await.unwrap().unwrap();
    assert_eq!(amend.ledger.writes.len(), 1);
    assert_eq!(amend.ledger.writes[0].operation, WriteOperation::Amend);
    assert_eq!(amend.ledger.writes[0].revision_number, 3);

    let incident = get_turn(&db.pool, workspace.turns[2].turn_id).await.unwrap().unwrap();
    assert_eq!(incident.ledger.writes.len(), 2);
    assert!(incident.ledger.writes.iter().all(|w| w.operation == WriteOperation::Create && w.revision_number == 1));

    let queue = mesh_memory::operator::sharing_queue(&db.store, Some(SharingState::Pending)).await.unwrap();
    let pending: Vec<_> = queue.into_iter().filter(|r| r.runtime_agent_id == workspace.agent).collect();
    assert_eq!(pending.len(), 1);
    assert_eq!(Some(SharingRequestId(pending[0].id)), workspace.pending_sharing_request);
    let grants: i64 = sqlx::query_scalar("SELECT count(*) FROM sharing_grants").fetch_one(&db.pool).await.unwrap();
    assert_eq!(grants, 0);

    let event = workspace.withheld_diagnostic_event.expect("withheld event");
    let (category, categories): (Option<String>, Vec<String>) = sqlx::query_as(
        "SELECT degradation_category, degradation_categories FROM memory_retrieval_events WHERE id = $1",
    )
    .bind(event)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert!(categories.contains(&"eligibility_withheld_unknown".to_owned()), "{category:?} {categories:?}");
}

#[tokio::test]
async fn cli_prints_turns_and_ledgers() {
    let db = common::test_db().await;
    let out = cli().args(["--json", "demo", "seed"]).env("DATABASE_URL", &db.url).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let workspace: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(workspace["turns"].as_array().unwrap().len(), 5);

    let out = cli().args(["turns", "--agent", "mesh-assistant"]).env("DATABASE_URL", &db.url).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 5, "{text}");
    assert!(text.contains("claim_guard_failed") && text.contains("amend "), "{text}");

    let incident = workspace["turns"][2]["turn_id"].as_str().unwrap();
    let out = cli().args(["turn", incident]).env("DATABASE_URL", &db.url).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("outcome: claim_guard_failed"), "{text}");
    assert!(text.contains("create  entry"), "{text}");
    assert!(text.contains("reattributed") && text.contains("superseded"), "{text}");

    let out = cli().args(["turn", "not-a-turn"]).env("DATABASE_URL", &db.url).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("malformed turn id"));

    // `chat` without a configured model fails clearly before reading any input.
    let out = cli()
        .args(["chat", "--agent", "mesh-assistant", "--conversation", "C-ENG", "--as", "U456"])
        .env("DATABASE_URL", &db.url)
        .env_remove("MESH_MODEL_BASE_URL")
        .env_remove("MESH_MODEL")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("MESH_MODEL_BASE_URL"));
}
