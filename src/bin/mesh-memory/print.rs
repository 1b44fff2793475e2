//! What the CLI writes on stdout: JSON with `--json`, else text. The text of a view is its
//! `Display` impl in the core (`show`, `turn`, `turns`, `explain`, `index status`, `mcp token
//! list`), the same types the console renders, so the two shells cannot disagree; what only the
//! CLI reports (recall's scores, repair, the demo seed, the embedded cluster) is formatted here.

use std::fmt::Display;

use anyhow::Result;
use mesh_memory::demo::DemoWorkspace;
use mesh_memory::pg::ClusterStatus;
use mesh_memory::privacy::repair::RepairedSource;
use mesh_memory::retrieval::{render, SearchOutcome};
use serde::Serialize;

/// `value` as pretty JSON.
pub(crate) fn json<T: Serialize>(value: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// A view: as JSON with `--json`, else its text.
pub(crate) fn view<T: Serialize + Display>(as_json: bool, value: &T) -> Result<()> {
    if as_json {
        return json(value);
    }
    println!("{value}");
    Ok(())
}

/// A list: as one JSON array with `--json`, else one line per row (`line` renders it through
/// the row's `Display`), or `empty` when there is none.
pub(crate) fn rows<T: Serialize>(
    as_json: bool,
    rows: &[T],
    line: impl Fn(&T) -> String,
    empty: Option<&str>,
) -> Result<()> {
    if as_json {
        return json(&rows);
    }
    if let (true, Some(empty)) = (rows.is_empty(), empty) {
        println!("{empty}");
    }
    for row in rows {
        println!("{}", line(row));
    }
    Ok(())
}

/// One line of text: a command's short report (`migrations applied`, a URL, an id).
pub(crate) fn line(text: impl Display) {
    println!("{text}");
}

/// A rendered report (the evaluation's and the bench's tables), as is.
pub(crate) fn table(text: &str) {
    print!("{text}");
}

/// A one-line progress bar on stderr, redrawn in place.
pub(crate) fn progress(progress: mesh_memory::semantic::RebuildProgress) {
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

/// `db status`.
pub(crate) fn cluster_status(as_json: bool, status: &ClusterStatus) -> Result<()> {
    if as_json {
        return json(status);
    }
    println!("data directory: {}", status.data_dir.display());
    println!("binaries:       {}", status.bin_dir.display());
    println!("initialized:    {}", status.initialized);
    println!("running:        {}", status.running);
    Ok(())
}

/// `demo seed`: what it created, with the commands to look at it.
pub(crate) fn demo_workspace(as_json: bool, workspace: &DemoWorkspace) -> Result<()> {
    if as_json {
        return json(workspace);
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

/// `repair`: the sources repaired (or that a dry run would repair).
pub(crate) fn repaired(as_json: bool, repaired: &[RepairedSource], dry_run: bool) -> Result<()> {
    if as_json {
        return json(&repaired);
    }
    let verb = if dry_run { "would repair" } else { "repaired" };
    println!("{verb} {} source(s){}", repaired.len(), if dry_run { " (dry run: nothing changed)" } else { "" });
    for r in repaired {
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

/// `recall`: the audit event, the prompt section when `prompt`, then each selection with its
/// score and reason, what packing skipped and the withheld counts.
pub(crate) fn recall(as_json: bool, outcome: &SearchOutcome, prompt: bool) -> Result<()> {
    if as_json {
        return json(outcome);
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
    if prompt {
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
        println!("   {}", render::prompt_line(s).trim_start_matches("- "));
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

/// `role create`'s report: the role, its kind and the groups it joined.
pub(crate) fn role_created(as_json: bool, role: &str, kind: mesh_memory::store::ConsoleRoleKind) -> Result<()> {
    if as_json {
        return json(&serde_json::json!({ "role": role, "kind": kind, "groups": kind.groups() }));
    }
    let kind_name = serde_json::to_value(kind)?.as_str().unwrap_or_default().to_owned();
    println!("created login role {role} ({kind_name}: member of {})", kind.groups().join(", "));
    Ok(())
}
