//! Delivery is atomic with respect to erasure (issue 52, item 2): a reply is either withheld or
//! reachable by the erasure, never stored after the erasure that should have removed it. Both
//! orders are driven on a real PostgreSQL with real concurrent transactions:
//! - an erasure in progress (it holds [`ERASURE_LOCK_KEY`] exclusively and has erased the used
//!   revision, uncommitted) makes the delivery wait; the delivery then withholds the reply;
//! - a delivery in progress (its transaction holds the lock shared, paused on a row lock this
//!   test holds) makes the erasure wait; the erasure's scope then holds the turn and its reply.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{login_role_with_password, test_db, Person, TestDb, World};
use mesh_memory::erasure::{ERASURE_LOCK_KEY, ERASURE_MARKER};
use mesh_memory::privacy::Rule;
use mesh_memory::retrieval::{RetrievalConfig, Retriever};
use mesh_memory::store::Topology;
use mesh_memory::turn::{PreparedTurn, ScriptedModel, TurnEngine, TurnOutcome, TurnReport};
use mesh_memory::{ConversationId, EntryId, RevisionId};
use sqlx::PgPool;
use tokio::task::JoinHandle;
use uuid::Uuid;

/// A phrase nothing else in the store says.
const CANARY: &str = "the spare key is under the canary-5R2K basil heron planter";
const CANARY_TOKEN: &str = "canary-5r2k";

/// How long a test waits for the other transaction to reach the point it waits for.
const PATIENCE: Duration = Duration::from_secs(20);

struct Scene {
    db: TestDb,
    dm: ConversationId,
    entry: EntryId,
    revision: RevisionId,
    engine: TurnEngine,
    prepared: PreparedTurn,
    eraser: PgPool,
}

/// Dana told the agent the canary in her DM (a memory sourced from that message); she asks for it
/// again and a turn is prepared whose reply repeats it and whose prompt used the memory.
async fn scene() -> Scene {
    let db = test_db().await;
    let mut world = World::new(&db.store, "assistant").await;
    let dana: Person = world.person("Dana", "U321").await;
    let dm = world.conversation("D-DANA", Topology::Direct, &[&dana]).await;
    let (entry, revision) = world.remember(dm, &dana, Some(dana.actor), CANARY).await;
    let asked = world.say(dm, &dana, "Where is the spare key planter?").await;
    let model = Arc::new(ScriptedModel::new().reply(&format!("You told me: {CANARY}.")));
    let engine = TurnEngine::new(db.store.clone(), Retriever::new(db.store.clone(), RetrievalConfig::default()), model);
    let prepared = engine.prepare(asked).await.unwrap();
    assert!(prepared.used_revisions().contains(&(entry, revision)), "the prompt used the memory");
    let (_, _, eraser) = login_role_with_password(&db, "eraser", "mesh_eraser").await;
    Scene { db, dm, entry, revision, engine, prepared, eraser }
}

fn deliver_in_background(s: &mut Scene) -> JoinHandle<TurnReport> {
    let engine = s.engine.clone();
    let prepared = s.prepared.clone();
    tokio::spawn(async move { engine.deliver(prepared).await.unwrap() })
}

/// Erases the entry as an operator's transaction does: the erasure lock, the scope read under it,
/// the erasure function with that scope confirmed. Returns the scope's ids.
async fn erase_entry(tx: &mut sqlx::PgConnection, entry: EntryId) -> Vec<Uuid> {
    sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(ERASURE_LOCK_KEY).execute(&mut *tx).await.unwrap();
    let scope: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM memory_erasure_scope('entry', $1, NULL) ORDER BY id")
        .bind(entry)
        .fetch_all(&mut *tx)
        .await
        .unwrap();
    sqlx::query(
        "SELECT mesh_operator_erase(gen_random_uuid(), 'entry', $1, NULL, 'secret pasted by mistake', $2, '{}')",
    )
    .bind(entry)
    .bind(&scope)
    .execute(&mut *tx)
    .await
    .unwrap();
    scope
}

/// Waits until `task` has finished or a backend of this database waits for the lock `waiting`
/// describes (a condition on `pg_locks` row `l`); true when it was seen waiting.
async fn waits_or_finishes<T>(pool: &PgPool, task: &JoinHandle<T>, waiting: &'static str) -> bool {
    let started = Instant::now();
    loop {
        if task.is_finished() {
            return false;
        }
        let statement = format!(
            "SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                             WHERE a.datname = current_database() AND NOT l.granted AND {waiting})"
        );
        let seen: bool =
            sqlx::query_scalar(sqlx::AssertSqlSafe(statement)).bind(ERASURE_LOCK_KEY).fetch_one(pool).await.unwrap();
        if seen {
            return true;
        }
        assert!(started.elapsed() < PATIENCE, "neither finished nor waited for {waiting}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A wait for the erasure lock (`$1`), in either mode.
const ON_ERASURE_LOCK: &str = "l.locktype = 'advisory' AND l.classid = ($1 >> 32)::oid
                               AND l.objid = ($1 & 4294967295)::oid AND l.objsubid = 1";

/// A wait for a row (a transaction id or a tuple).
const ON_A_ROW: &str = "l.locktype IN ('transactionid', 'tuple') AND $1 IS NOT NULL";

/// Outbound messages of the store whose body holds the canary.
async fn outbound_canaries(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM messages WHERE direction = 'outbound' AND body ILIKE $1")
        .bind(format!("%{CANARY_TOKEN}%"))
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_delivery_during_an_erasure_waits_for_it_and_then_withholds_the_reply() {
    let mut s = scene().await;
    let mut erasing = s.eraser.begin().await.unwrap();
    erase_entry(&mut erasing, s.entry).await;

    let delivery = deliver_in_background(&mut s);
    let delivery_waited = waits_or_finishes(&s.db.pool, &delivery, ON_ERASURE_LOCK).await;
    erasing.commit().await.unwrap();
    let report = delivery.await.unwrap();

    let TurnOutcome::Withheld { recheck } = &report.outcome else {
        panic!("the reply was not withheld although its memory was being erased: {:?}", report.outcome)
    };
    assert_eq!(recheck.stale_revisions.len(), 1, "{recheck:?}");
    assert_eq!(recheck.stale_revisions[0].revision_id, s.revision);
    assert_eq!(recheck.stale_revisions[0].rule, Rule::Erased, "the recheck saw the committed erasure");
    assert_eq!(report.reply, None);
    assert_eq!(outbound_canaries(&s.db.pool).await, 0, "no outbound message holds the erased text");
    assert!(delivery_waited, "the delivery waited for the erasure lock");
    let (outcome, outbound): (String, Option<Uuid>) =
        sqlx::query_as("SELECT outcome::text, outbound_message_id FROM agent_turns WHERE id = $1")
            .bind(report.turn_id)
            .fetch_one(&s.db.pool)
            .await
            .unwrap();
    assert_eq!((outcome.as_str(), outbound), ("withheld", None), "the turn is recorded as withheld");
}

#[tokio::test]
async fn an_erasure_during_a_delivery_waits_for_it_and_then_reaches_the_turn_and_its_reply() {
    let mut s = scene().await;
    // The delivery's transaction pauses on the conversation's row (the reply's foreign key) while
    // this transaction holds it, after it has taken the erasure lock and run the recheck.
    let mut holder = s.db.pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM conversations WHERE id = $1 FOR UPDATE").bind(s.dm).execute(&mut *holder).await.unwrap();
    let delivery = deliver_in_background(&mut s);
    assert!(waits_or_finishes(&s.db.pool, &delivery, ON_A_ROW).await, "the delivery paused on the row");
    let delivery_held_the_lock: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted
                           AND l.mode = 'ShareLock' AND l.objid = ($1 & 4294967295)::oid)",
    )
    .bind(ERASURE_LOCK_KEY)
    .fetch_one(&s.db.pool)
    .await
    .unwrap();

    let eraser = s.eraser.clone();
    let entry = s.entry;
    let erasure = tokio::spawn(async move {
        let mut tx = eraser.begin().await.unwrap();
        let scope = erase_entry(&mut tx, entry).await;
        tx.commit().await.unwrap();
        scope
    });
    let erasure_waited = waits_or_finishes(&s.db.pool, &erasure, ON_ERASURE_LOCK).await;
    holder.rollback().await.unwrap();
    let report = delivery.await.unwrap();
    let scope = erasure.await.unwrap();

    // The recheck ran before the erasure committed: the reply was delivered, and the erasure,
    // which read its scope after the delivery committed, reached the turn and the reply.
    let TurnOutcome::Delivered { outbound_message } = report.outcome else { panic!("{:?}", report.outcome) };
    assert!(scope.contains(&report.turn_id.0), "the erasure's scope holds the turn");
    assert!(scope.contains(&outbound_message.0), "the erasure's scope holds the reply");
    let body: String = sqlx::query_scalar("SELECT body FROM messages WHERE id = $1")
        .bind(outbound_message)
        .fetch_one(&s.db.pool)
        .await
        .unwrap();
    assert_eq!(body, ERASURE_MARKER, "the reply's body is the marker");
    assert_eq!(outbound_canaries(&s.db.pool).await, 0, "no outbound message holds the erased text");
    assert!(delivery_held_the_lock, "the paused delivery held the erasure lock shared");
    assert!(erasure_waited, "the erasure waited for the delivery");
    // A second erasure of the same scope finds nothing left (MM012), and nothing holds the text.
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM memory_erasure_scope('entry', $1, NULL)")
        .bind(s.entry)
        .fetch_one(&s.db.pool)
        .await
        .unwrap();
    assert_eq!(left, 0);
}
