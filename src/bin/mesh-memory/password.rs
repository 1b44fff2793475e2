//! Reading a new role's password without it ever being a command-line argument (which every
//! user of the machine can read in the process list): from MESH_NEW_ROLE_PASSWORD, or one line on
//! stdin, typed without echo when stdin is a terminal.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::{Context, Result};

/// The environment variable a script sets the new role's password in.
const PASSWORD_VARIABLE: &str = "MESH_NEW_ROLE_PASSWORD";

/// The password for the new role `name`: MESH_NEW_ROLE_PASSWORD, else the first line of stdin
/// (without its line ending).
pub(crate) fn new_role_password(name: &str) -> Result<String> {
    if let Some(password) = std::env::var_os(PASSWORD_VARIABLE) {
        return password.into_string().map_err(|_| anyhow::anyhow!("{PASSWORD_VARIABLE} is not valid UTF-8"));
    }
    let stdin = std::io::stdin();
    let terminal = stdin.is_terminal();
    if terminal {
        eprint!("password for the new role {name}: ");
        std::io::stderr().flush().ok();
    }
    let mut line = String::new();
    let read = {
        let _quiet = terminal.then(EchoOff::new).flatten();
        stdin.lock().read_line(&mut line).context("reading the password from stdin")?
    };
    if terminal {
        eprintln!();
    }
    anyhow::ensure!(read > 0, "no password: set {PASSWORD_VARIABLE} or write it as one line on stdin");
    Ok(line.trim_end_matches(['\n', '\r']).to_owned())
}

/// The terminal's echo turned off while it lives (restored on drop, also on error).
struct EchoOff(libc::termios);

impl EchoOff {
    fn new() -> Option<Self> {
        // SAFETY: tcgetattr/tcsetattr on stdin's descriptor with a termios it fills in.
        unsafe {
            let mut saved: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(libc::STDIN_FILENO, &mut saved) != 0 {
                return None;
            }
            let mut quiet = saved;
            quiet.c_lflag &= !libc::ECHO;
            (libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &quiet) == 0).then_some(EchoOff(saved))
        }
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        // SAFETY: restores the attributes read in `new` on the same descriptor.
        unsafe {
            libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &self.0);
        }
    }
}
