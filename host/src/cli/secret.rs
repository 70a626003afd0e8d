//! `chitin secret set|list|remove`: the operator's secrets, encrypted in the data directory's
//! database. A value is read from stdin or a prompt that does not echo, never from the command
//! line (where `ps` and shell history would keep it).

use std::io::{IsTerminal, Read};

use anyhow::Context;
use zeroize::Zeroizing;

use super::{Cli, Exit};
use crate::data_dir::DataDir;
use crate::services::Services;

/// Arguments of `chitin secret`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Store a secret. The value is read from stdin when it is not a terminal (one trailing
    /// newline is dropped), else asked for without echo.
    Set {
        /// The secret's name (`[A-Za-z0-9_.-]`, at most 128 characters).
        name: String,
    },
    /// List the names of stored secrets (never values).
    List {
        /// Print a JSON array of names.
        #[arg(long)]
        json: bool,
    },
    /// Remove a secret.
    Remove {
        /// The secret's name.
        name: String,
    },
}

pub(super) async fn run(cli: &Cli, args: &Args) -> anyhow::Result<Exit> {
    let data = DataDir::resolve(cli.data_dir.as_deref())?;
    // The workspace plays no part here; the data directory itself stands in for it.
    let state = super::open_state(cli, &data)?;
    let services = Services::with_state(data.root(), data.clone(), state)?;
    let store = services.secrets()?;
    match &args.command {
        Command::Set { name } => {
            crate::secrets::validate_name(name)?;
            let value = read_value(name)?;
            store.set(name, &value)?;
            errln!("secret `{name}` set");
        }
        Command::List { json } => {
            let names = store.names()?;
            if *json {
                outln!("{}", serde_json::to_string(&names)?);
            } else {
                for name in names {
                    outln!("{name}");
                }
            }
        }
        Command::Remove { name } => {
            if store.remove(name)? {
                errln!("secret `{name}` removed");
            } else {
                errln!("secret `{name}` was not set");
            }
        }
    }
    Ok(Exit::Ok)
}

/// The value: stdin when piped (without one trailing newline), else a no-echo prompt.
fn read_value(name: &str) -> anyhow::Result<Zeroizing<String>> {
    let stdin = std::io::stdin();
    let mut value = Zeroizing::new(String::new());
    if stdin.is_terminal() {
        *value = rpassword::prompt_password(format!("value of secret `{name}`: "))
            .context("cannot read the value from the terminal")?;
    } else {
        stdin
            .lock()
            .read_to_string(&mut value)
            .context("cannot read the value from stdin (it must be UTF-8 text)")?;
        // One trailing newline is what `echo` and editors add; anything more is the value's.
        if value.ends_with('\n') {
            value.pop();
            if value.ends_with('\r') {
                value.pop();
            }
        }
    }
    if value.is_empty() {
        anyhow::bail!("the value of secret `{name}` is empty; an empty secret is refused");
    }
    Ok(value)
}
