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
