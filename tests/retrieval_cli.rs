//! `mesh-memory recall` and `mesh-memory explain` on the demo workspace, through the real binary
//! and a real PostgreSQL: another engineer's "tabs or spaces?" gets the CTO's preference with its
//! subject and source, and the private DM fact stays out of every other audience.

mod common;

use std::process::{Command, Output};

fn cli(url: &str, args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_mesh-memory"))
        .args(args)
        .env("DATABASE_URL", url)
        .env_remove("MESH_LOG")
        .env_remove("MESH_AGENT_MASTER_KEY")
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn demo_entry(workspace: &serde_json::Value, name: &str) -> String {
    workspace["entries"].as_array().unwrap().iter().find(|e| e[0] == name).unwrap()[1].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn recall_on_the_demo_returns_the_cto_preference_and_never_the_private_fact() {
    let db = common::test_db().await;
    let url = db.url.clone();
    let workspace: serde_json::Value = serde_json::from_slice(&cli(&url, &["--json", "demo", "seed"]).stdout).unwrap();
    let tabs = demo_entry(&workspace, "tabs-preference");
    let private = demo_entry(&workspace, "private-interview");

    let base = ["recall", "--agent", "mesh-assistant", "--conversation", "C-ENG", "--actor", "U456"];
    let text = String::from_utf8(cli(&url, &[&base[..], &["tabs or spaces?"]].concat()).stdout).unwrap();
    assert!(text.contains(&tabs), "{text}");
    assert!(text.contains("About Victor (id U123), told by Victor (id U123)"), "{text}");
    assert!(text.contains("why: full-text match, rank 1"), "{text}");

    let json: serde_json::Value =
        serde_json::from_slice(&cli(&url, &[&["--json"], &base[..], &["tabs or spaces?"]].concat()).stdout).unwrap();
    let tabs_json = json["selections"].as_array().unwrap().iter().find(|s| s["entry_id"] == tabs.as_str()).unwrap();
    assert_eq!(tabs_json["subject"]["label"], "Victor (id U123)");
    assert_eq!(tabs_json["source"]["label"], "Victor (id U123)");
    assert!(tabs_json["components"]["lexical"]["rank"].as_u64().is_some());

    // The private fact, asked in its own words, in every other conversation: never returned.
    let wording = "Is interviewing at another company next month and has not told their manager.";
    for conversation in ["C-ENG", "D-VICTOR", "D-ALEXKIM"] {
        let args = ["--json", "recall", "--agent", "mesh-assistant", "--conversation", conversation, wording];
        let out = String::from_utf8(cli(&url, &args).stdout).unwrap();
        let json: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert!(!out.contains("interviewing"), "{conversation}: {out}");
        assert!(!out.contains(&private), "{conversation}: {out}");
        assert_eq!(json["withheld"]["audience_not_covered"], 1, "{conversation}");
    }
    let args = ["recall", "--agent", "mesh-assistant", "--conversation", "D-PRIYA", "--actor", "U456", wording];
    assert!(String::from_utf8(cli(&url, &args).stdout).unwrap().contains(&private), "eligible in Priya's DM");

    // Explain names the rule and the readers who could not read the source.
    let args = ["explain", &private, "--conversation", "C-ENG"];
    let text = String::from_utf8(cli(&url, &args).stdout).unwrap();
    assert!(text.contains("rejected: source"), "{text}");
    assert!(text.contains("Victor (id U123)"), "{text}");
    let args = ["explain", &tabs, "--conversation", "C-ENG", "--agent", "mesh-assistant"];
    assert!(String::from_utf8(cli(&url, &args).stdout).unwrap().contains("verdict: eligible"));
    // One command, one shape: --json prints the view the text renders (and the console shows).
    let args = ["--json", "explain", &private, "--conversation", "C-ENG"];
    let json: serde_json::Value = serde_json::from_slice(&cli(&url, &args).stdout).unwrap();
    assert_eq!(json["rule"], "audience_not_covered");
    assert!(text.contains(json["explanation"].as_str().unwrap()), "{text}");
    let missing = json["failing_source"]["missing_actors"].as_array().unwrap();
    assert!(missing.iter().any(|m| m == "Victor (id U123)"), "{json}");

    // Explain an audited search by its event id.
    let event = json_event(&url, &base);
    let text = String::from_utf8(cli(&url, &["explain", &event, "--event"]).stdout).unwrap();
    assert!(text.contains(&tabs), "{text}");
}

fn json_event(url: &str, base: &[&str]) -> String {
    let out = cli(url, &[&["--json"], base, &["tabs"]].concat());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    json["event_id"].as_str().unwrap().to_owned()
}
