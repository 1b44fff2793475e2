//! tauri-build reads `tauri.conf.json` beside this crate's Cargo.toml (where the Tauri CLI looks
//! for it too, to bundle the package); the UI it embeds is `../ui/dist`.
fn main() {
    println!("cargo:rerun-if-changed=../ui/dist");
    tauri_build::build();
}
