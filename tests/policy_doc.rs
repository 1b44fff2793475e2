//! `docs/policy.md` names, for every rule of the privacy policy, the function that implements it
//! and the test that pins it. This test keeps those names true: a name in backticks ending in `()`
//! must be an SQL function of a freshly migrated database, and `path.rs::name` a function in that
//! file. Renaming or deleting one without updating the page fails here.

mod common;

use common::test_db;

/// The backticked spans of a markdown text.
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// `(SQL functions, (file, function) references)` named by the page.
fn references(text: &str) -> (Vec<&str>, Vec<(&str, &str)>) {
    let mut functions = Vec::new();
    let mut items = Vec::new();
    for span in code_spans(text) {
        if let Some(name) = span.strip_suffix("()") {
            if !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
                functions.push(name);
            }
        } else if let Some((file, item)) = span.split_once("::") {
            if file.ends_with(".rs") {
                items.push((file, item));
            }
        }
    }
    (functions, items)
}

#[tokio::test]
async fn every_function_and_test_the_policy_page_names_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("docs/policy.md")).expect("docs/policy.md");
    let (functions, items) = references(&page);
    assert!(functions.len() >= 8 && items.len() >= 10, "the page names its functions and tests");
    let db = test_db().await;
    let mut missing = Vec::new();
    for function in &functions {
        let exists: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                             WHERE n.nspname = 'public' AND p.proname = $1)",
        )
        .bind(function)
        .fetch_one(&db.pool)
        .await
        .unwrap();
        if !exists {
            missing.push(format!("SQL function {function}()"));
        }
    }
    for (file, item) in &items {
        let source = std::fs::read_to_string(root.join(file)).unwrap_or_default();
        // A generic function's name is followed by its parameters' angle brackets.
        if !source.contains(&format!("fn {item}(")) && !source.contains(&format!("fn {item}<")) {
            missing.push(format!("{file}::{item}"));
        }
    }
    assert!(missing.is_empty(), "docs/policy.md names what does not exist: {missing:?}");
}

#[test]
fn references_are_read_from_code_spans_only() {
    let (functions, items) =
        references("The `memory_x()` rule, pinned by `tests/a.rs::b`; not memory_y() nor `a::b` nor `Some(x)`.");
    assert_eq!(functions, ["memory_x"]);
    assert_eq!(items, [("tests/a.rs", "b")]);
}
