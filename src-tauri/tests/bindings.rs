//! The TypeScript bindings the UI imports (`ui/src/bindings.ts`) must match the command layer.
//! This test regenerates them and fails when the committed file is stale; run it with
//! `UPDATE_BINDINGS=1` to rewrite the file.

use std::path::PathBuf;

#[test]
fn committed_bindings_match_the_command_layer() {
    let committed_path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../ui/src/bindings.ts");
    let fresh_path = std::env::temp_dir().join(format!("mesh-console-bindings-{}.ts", std::process::id()));
    mesh_memory_console::export_bindings(&fresh_path).expect("bindings export");
    let fresh = std::fs::read_to_string(&fresh_path).expect("read exported bindings");
    let _ = std::fs::remove_file(&fresh_path);
    assert!(fresh.contains("signIn") && fresh.contains("decideSharingRequest"), "export lacks commands");
    if std::env::var_os("UPDATE_BINDINGS").is_some() {
        std::fs::write(&committed_path, &fresh).expect("write ui/src/bindings.ts");
        return;
    }
    let committed = std::fs::read_to_string(&committed_path).unwrap_or_default();
    assert!(
        committed == fresh,
        "ui/src/bindings.ts is stale: run `UPDATE_BINDINGS=1 cargo test -p mesh-memory-console --test bindings` \
         and commit the result"
    );
}

/// The fields whose values form a closed set (the core's enums) reach the UI as literal unions,
/// so a view cannot compare against a misspelt or retired name: no such field is a `string`.
#[test]
fn closed_sets_are_literal_unions_not_strings() {
    let path = std::env::temp_dir().join(format!("mesh-console-unions-{}.ts", std::process::id()));
    mesh_memory_console::export_bindings(&path).expect("bindings export");
    let bindings = std::fs::read_to_string(&path).expect("read exported bindings");
    let _ = std::fs::remove_file(&path);
    let closed = ["topology", "restriction", "rule", "direction", "degradation_categor", "state", "operation"];
    let stringly: Vec<&str> = bindings
        .lines()
        .map(str::trim)
        .filter(|line| {
            let Some((name, ty)) = line.split_once(':') else { return false };
            let name = name.trim_start_matches('\t').trim_end_matches('?');
            closed.iter().any(|c| name.ends_with(c) || name.starts_with(c)) && ty.trim_start().starts_with("string")
        })
        .collect();
    assert!(stringly.is_empty(), "string-typed closed sets in the bindings: {stringly:?}");
    for union in ["Topology", "RestrictionKind", "RuleName", "Direction", "DegradationCategory", "SharingState"] {
        let start = bindings.find(&format!("export type {union} = ")).unwrap_or_else(|| panic!("no type {union}"));
        let declaration = &bindings[start..start + bindings[start..].find(';').expect("a declaration ends")];
        let code: String = declaration.lines().filter(|l| !l.trim_start().starts_with("/*")).collect();
        assert!(code.contains(" | ") && !code.contains("string"), "{union} is not a literal union: {code}");
    }
}
