//! The `mesh-memory` command line: a thin shell over the core crate. `args` is what clap parses,
//! `dispatch` maps each command to the core (the operator layer for operator actions), `print`
//! writes the result as JSON or as the text of the core's views; every decision lives in the
//! library.

mod args;
mod dispatch;
mod password;
mod print;

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    // Behave like other Unix tools when the reader goes away (`mesh-memory turns | head`): end
    // quietly on SIGPIPE instead of panicking inside println!.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread writes to stdout.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("MESH_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let cli = args::Cli::parse();
    match dispatch::run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
