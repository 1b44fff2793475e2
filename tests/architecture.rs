//! The module graph the code map promises, checked by reading the source: retrieval owns the
//! semantic-source interface and never imports the implementations in `src/semantic`, which
//! depend on retrieval (so the two cannot form a cycle).

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// Lines of `dir`'s code (comments left out) that name `module`, as `file:line: text`.
fn references(dir: &str, module: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut found = Vec::new();
    for file in rust_files(&root) {
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains(module) {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn retrieval_never_imports_the_semantic_implementations() {
    let back = references("src/retrieval", "crate::semantic");
    assert!(back.is_empty(), "src/retrieval must not depend on src/semantic (a cycle):\n{}", back.join("\n"));
}

#[test]
fn the_semantic_implementations_build_on_retrieval_s_interface() {
    // The check above would pass vacuously if the files moved; the other direction must exist.
    assert!(!references("src/semantic", "crate::retrieval").is_empty());
    assert!(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/retrieval/semantic_source.rs").exists());
}

#[test]
fn the_store_is_the_bottom_layer_and_shell_facing_modules_sit_on_top() {
    // The store owns canonical rows and knows no policy, ranking or shell; privacy and retrieval
    // know no view, constructor, turn or tool built on them.
    let rules: [(&str, &[&str]); 3] = [
        (
            "src/store",
            &["privacy", "retrieval", "semantic", "turn", "tools", "views", "service", "evaluation", "bench"],
        ),
        ("src/privacy", &["retrieval", "semantic", "turn", "views", "service", "evaluation", "bench"]),
        ("src/retrieval", &["turn", "views", "service", "evaluation", "bench", "demo"]),
    ];
    let mut broken = Vec::new();
    for (dir, above) in rules {
        for module in above {
            broken.extend(references(dir, &format!("crate::{module}::")));
            broken.extend(references(dir, &format!("crate::{module};")));
            broken.extend(references(dir, &format!("crate::{module}::{{")));
        }
    }
    assert!(broken.is_empty(), "a lower layer imports a higher one:\n{}", broken.join("\n"));
}

/// Lines of the file `path` (comments left out) that contain `needle`, as `file:line: text`.
fn file_references(path: &str, needle: &str) -> Vec<String> {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    text.lines()
        .enumerate()
        .filter(|(_, line)| line.split("//").next().unwrap_or("").contains(needle))
        .map(|(n, line)| format!("{path}:{}: {}", n + 1, line.trim()))
        .collect()
}

/// The shells, each with the files it is made of: the console's commands and session, and every
/// file of the CLI. (The MCP server does no operator action; it authenticates tokens and serves
/// the runtime's tools.)
fn shells() -> Vec<(&'static str, Vec<String>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cli: Vec<String> = rust_files(&root.join("src/bin/mesh-memory"))
        .iter()
        .map(|file| file.strip_prefix(root).unwrap().display().to_string())
        .collect();
    assert!(cli.len() >= 4, "the CLI's files moved: {cli:?}");
    vec![
        ("the console's commands", vec!["src-tauri/src/commands.rs".to_owned()]),
        ("the console's session", vec!["src-tauri/src/state.rs".to_owned()]),
        ("the CLI", cli),
    ]
}

#[test]
fn the_shells_do_operator_actions_through_the_operator_layer_only() {
    // Every operator action and the reads it is decided from have one way in: src/operator.
    let direct = [
        "decide_as_operator",
        "approve_as_operator",
        "deny_as_operator",
        "revoke_access_token_as_operator",
        "repair::review_evidence",
        "issue_access_token_as_operator",
        "store::create_console_role",
        ".speaker_binding(",
        "list_requests(",
        "store::connect_as",
        "store::operator_rights",
    ];
    let mut bypasses = Vec::new();
    for (_, files) in shells() {
        for file in &files {
            for call in direct {
                bypasses.extend(file_references(file, call));
            }
        }
    }
    assert!(bypasses.is_empty(), "a shell bypasses the operator layer:\n{}", bypasses.join("\n"));
    for (shell, files) in shells() {
        let uses = files.iter().flat_map(|file| file_references(file, "operator")).count();
        assert!(uses > 0, "{shell} does not use the operator layer");
    }
    assert!(!file_references("src/operator/mod.rs", "pub async fn revoke_access_token").is_empty());
}
