//! `chitin trust add|list|remove`: the trust store (which keys may sign which components).

use chitin_registry::keys::PublicKey;
use chitin_registry::trust_store::{Scope, TrustError, TrustStore, TrustedKey};

use super::{Cli, Exit, trust_file};
use crate::data_dir::DataDir;
use crate::signing_keys::key_store;

/// Arguments of `chitin trust`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do with the trust store.
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Trust a key to sign components within a scope.
    Add {
        /// The key: an OpenSSH public key (`ssh-ed25519 AAAA…`), a `.pub` file, or a key name in
        /// the data directory.
        key: String,
        /// Who the key belongs to.
        #[arg(long)]
        publisher: String,
        /// What it may sign: `*`, `namespace/*` or `namespace/name`; comma-separated or repeated.
        #[arg(long, required = true, value_delimiter = ',')]
        scope: Vec<String>,
    },
    /// Print the trust store.
    List,
    /// Stop trusting a key (by fingerprint, key id or publisher).
    Remove {
        /// Fingerprint (`SHA256:…`), key id, or publisher name.
        selector: String,
    },
}

pub(super) async fn run(cli: &Cli, args: &Args) -> anyhow::Result<Exit> {
    let data = DataDir::resolve(cli.data_dir.as_deref())?;
    let path = trust_file(cli, &data);
    let mut store = TrustStore::load(&path)?;
    match &args.command {
        Command::Add {
            key,
            publisher,
            scope,
        } => {
            let public = resolve_key(&data, key)?;
            let scopes = scope
                .iter()
                .map(|s| Scope::parse(s))
                .collect::<Result<Vec<_>, _>>()
                .map_err(TrustError::Invalid)?;
            let entry = TrustedKey::new(public, publisher, scopes)?;
            store.add(entry.clone())?;
            store.save(&path)?;
            outln!(
                "trusted {} as {} for {}",
                entry.key.fingerprint(),
                entry.publisher,
                entry.scope_text()
            );
        }
        Command::List => {
            outln!("# {}", path.display());
            for key in store.keys() {
                outln!("{}", key.to_line());
            }
        }
        Command::Remove { selector } => {
            for removed in store.remove(selector)? {
                outln!(
                    "removed {} ({})",
                    removed.key.fingerprint(),
                    removed.publisher
                );
            }
            store.save(&path)?;
        }
    }
    Ok(Exit::Ok)
}

fn resolve_key(data: &DataDir, text: &str) -> anyhow::Result<PublicKey> {
    if text.trim_start().starts_with("ssh-") {
        return Ok(PublicKey::from_openssh(text)?);
    }
    let path = std::path::Path::new(text);
    if path.is_file() {
        let line = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("{}: cannot read: {e}", path.display()))?;
        return Ok(PublicKey::from_openssh(&line)?);
    }
    Ok(key_store(data).public(text)?)
}
