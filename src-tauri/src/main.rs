//! Entry point of the operator console window.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

fn main() {
    mesh_memory_console::run();
}
