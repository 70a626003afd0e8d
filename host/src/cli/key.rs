//! `chitin key generate|list|export|dev`: signing keys in the data directory.

use chitin_registry::trust_store::TrustStore;

use super::{Cli, Exit, trust_file};
use crate::data_dir::DataDir;
use crate::signing_keys::{DEV_KEY, ensure_dev_key, key_store};

/// Arguments of `chitin key`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do with keys.
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Create a new Ed25519 key pair (private key mode 0600 in the data directory).
    Generate {
        /// The key's name.
        name: String,
    },
    /// List the keys, with their key id, fingerprint and whom the trust store trusts them as.
    List,
    /// Print a key's public half as an OpenSSH line, ready for another host's trust store.
    Export {
        /// The key's name.
        name: String,
    },
    /// Create the local development key on first use, trust it for the `chitin` namespace, and
    /// print its trust-store line.
    Dev,
}

pub(super) async fn run(cli: &Cli, args: &Args) -> anyhow::Result<Exit> {
    let data = DataDir::resolve(cli.data_dir.as_deref())?;
    let keys = key_store(&data);
    match &args.command {
        Command::Generate { name } => {
            let info = keys.generate(name)?;
            outln!("generated key {name}");
            outln!("  private key: {}", info.path.display());
            outln!("  public key:  {}", info.public.to_openssh());
            outln!("  key id:      {}", info.public.key_id());
            outln!("  fingerprint: {}", info.public.fingerprint());
            outln!(
                "sign with `chitin sign FILE --key {name}`; others trust it with \
                 `chitin trust add '<public key>' --publisher NAME --scope NAMESPACE/*`"
            );
        }
        Command::List => {
            let trust = TrustStore::load(&trust_file(cli, &data))?;
            let listed = keys.list()?;
            if listed.is_empty() {
                outln!(
                    "no keys in {} (create one with `chitin key generate NAME`)",
                    keys.dir().display()
                );
                return Ok(Exit::Ok);
            }
            let width = listed
                .iter()
                .map(|k| k.name.len())
                .max()
                .unwrap_or(4)
                .max(4);
            outln!(
                "{:width$}  {:24}  {:50}  TRUSTED AS",
                "NAME",
                "KEY ID",
                "FINGERPRINT"
            );
            for key in listed {
                let trusted = trust
                    .get(&key.public)
                    .map(|t| format!("{} {}", t.publisher, t.scope_text()))
                    .unwrap_or_else(|| "-".to_owned());
                outln!(
                    "{:width$}  {:24}  {:50}  {trusted}",
                    key.name,
                    key.public.key_id().to_string(),
                    key.public.fingerprint()
                );
            }
        }
        Command::Export { name } => {
            outln!("{} {name}", keys.public(name)?.to_openssh());
        }
        Command::Dev => {
            let entry = ensure_dev_key(&keys, &trust_file(cli, &data))?;
            errln!(
                "development key {DEV_KEY} ({}) trusted for {}",
                entry.key.fingerprint(),
                entry.scope_text()
            );
            outln!("{}", entry.to_line());
        }
    }
    Ok(Exit::Ok)
}
