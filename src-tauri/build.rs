//! tauri-build reads `tauri.conf.json` from the current directory; the config sits at the
//! repository root (beside `icons/` and `ui/`), so change there first.
fn main() {
    let manifest_dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest_dir.parent().expect("src-tauri has a parent").to_path_buf();
    println!("cargo:rerun-if-changed={}", root.join("tauri.conf.json").display());
    println!("cargo:rerun-if-changed={}", root.join("ui/dist").display());
    std::env::set_current_dir(&root).expect("cannot enter the repository root");
    tauri_build::build();
}
