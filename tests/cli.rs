//! The CLI's edges: clear errors for bad input, nothing written.

mod common;

use std::process::Command;

fn cli() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mesh-memory"));
    cmd.env_remove("MESH_LOG");
    cmd
}

#[tokio::test]
async fn malformed_ids_and_invalid_utf8_are_refused_with_clear_messages() {
    let db = common::test_db().await;
    let url = db.url.clone();
    let before: i64 = sqlx::query_scalar("SELECT count(*) FROM memory_entries").fetch_one(&db.pool).await.unwrap();

    let out = cli().args(["show", "not-an-id"]).env("DATABASE_URL", &url).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("malformed entry id"), "{stderr}");

    use std::os::unix::ffi::OsStrExt;
    let invalid = std::ffi::OsStr::from_bytes(b"\xff\xfe-not-utf8");
    let out = cli().arg("show").arg(invalid).env("DATABASE_URL", &url).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.to_lowercase().contains("utf-8"), "{stderr}");

    let after: i64 = sqlx::query_scalar("SELECT count(*) FROM memory_entries").fetch_one(&db.pool).await.unwrap();
    assert_eq!(before, after);
}

#[tokio::test]
async fn demo_seed_then_show_prints_history_with_lineage() {
    let db = common::test_db().await;
    let url = db.url.clone();
    let out = cli().args(["--json", "demo", "seed"]).env("DATABASE_URL", &url).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let workspace: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let amended = workspace["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e[0] == "amended-team")
        .map(|e| e[1].as_str().unwrap().to_owned())
        .unwrap();

    let out = cli().args(["show", &amended]).env("DATABASE_URL", &url).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The short id a prompt or tool result shows names the same entry.
    let short = &amended[amended.len() - 12..];
    let by_short = cli().args(["show", short]).env("DATABASE_URL", &url).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&by_short.stdout), String::from_utf8_lossy(&out.stdout));
    let unknown = cli().args(["show", "000000000000"]).env("DATABASE_URL", &url).output().unwrap();
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no entry id ends in 000000000000"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("revision 1 (create)"), "{text}");
    assert!(text.contains("revision 2 (amend)"), "{text}");
    assert!(text.contains("parent_revision"), "{text}");
    assert!(text.contains("audience known: "), "{text}");
    assert!(text.contains("Dana (id U321)"), "{text}");

    let again = cli().args(["demo", "seed"]).env("DATABASE_URL", &url).output().unwrap();
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stdout).contains("already seeded"));
}
