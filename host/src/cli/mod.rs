//! The `chitin` command line: `list`, `call`, `schema`, `inspect`, `serve`, `key`, `sign`,
//! `verify`, `trust`, `policy`, `approvals`, `audit`, `secret`, and the registry commands
//! `publish`, `search`, `install`, `update`, `remove`.

/// `println!` for the command line's output: a reader that has gone ends the process quietly
/// (see [`stdout`]).
macro_rules! outln {
    () => {
        $crate::cli::stdout::write(format_args!(""), true)
    };
    ($($arg:tt)*) => {
        $crate::cli::stdout::write(format_args!($($arg)*), true)
    };
}

/// `print!` for the command line's output (see [`outln`]).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::stdout::write(format_args!($($arg)*), false)
    };
}

mod approvals;
mod audit;
mod call;
mod compose;
mod inspect;
mod install;
mod key;
mod list;
mod manifest;
mod policy;
mod precompile;
mod publish;
mod registry;
mod schema;
mod search;
mod secret;
mod serve;
mod shared_set;
mod sign;
mod stdout;
mod terminal_approver;
mod trust;
mod verify;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use chitin_registry::signature::SignatureError;
use clap::{Parser, Subcommand};

use crate::data_dir::{DATA_DIR_ENV, DataDir};
use crate::engine::EngineOptions;
use crate::error::{LoadError, ToolError};
use crate::host::Host;
use crate::policy::Policy;
use crate::runtime::Runtime;
use crate::services::Services;
use crate::state_db::{StateDb, StateUrl};
use crate::workspace::StatePath;

/// Where `just build-components` puts the first-party components, relative to the working
/// directory; used when no `--components` is given and it exists.
pub const BUILD_COMPONENTS_DIR: &str = "build/components";

/// Exit codes, so scripts can tell failures apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Success.
    Ok = 0,
    /// The host itself failed (cannot load components, bad policy, I/O).
    Host = 1,
    /// Command-line usage error (from the argument parser).
    Usage = 2,
    /// The tool's arguments were invalid (malformed JSON, schema violation).
    InvalidArgs = 3,
    /// The call was denied (permission, path, rate limit).
    Denied = 4,
    /// The tool ran and failed, or the sandbox stopped it (trap, memory, fuel).
    Failed = 5,
    /// The call ran out of time.
    Timeout = 6,
    /// No such tool (or the tool reported something not found).
    NotFound = 7,
}

impl Exit {
    /// The exit code for a tool error.
    pub fn for_error(e: &ToolError) -> Self {
        match e {
            ToolError::InvalidArgs(_) => Self::InvalidArgs,
            ToolError::PermissionDenied(_)
            | ToolError::InvalidPath(_)
            | ToolError::RateLimited(_) => Self::Denied,
            ToolError::ExecutionFailed(_) | ToolError::ExternalService(_) => Self::Failed,
            ToolError::Timeout(_) => Self::Timeout,
            ToolError::NotFound(_) => Self::NotFound,
            ToolError::HostFault(_) => Self::Host,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e as u8)
    }
}

fn long_version() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        format!(
            "{}\ncontracts accepted: {}\nwasmtime 48.0.8",
            env!("CARGO_PKG_VERSION"),
            crate::contract::accepted_summary()
        )
    })
}

/// chitin — a tool host for AI agents where every tool is a sandboxed WebAssembly component.
#[derive(Debug, Parser)]
#[command(name = "chitin", version, long_version = long_version())]
pub struct Cli {
    /// Data directory (compile cache; later database, keys, installed components).
    /// Default: $XDG_DATA_HOME/chitin.
    #[arg(long, global = true, env = DATA_DIR_ENV, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// Compile cache: components compiled to machine code, derived from the component files
    /// and safe to delete; several data directories may share one. Default: the data
    /// directory's `cache` folder.
    #[arg(long, global = true, env = "CHITIN_CACHE_DIR", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,

    /// Component file or directory of `*.wasm` to load; repeatable. Default: ./build/components
    /// if it exists, else the data directory's components folder.
    #[arg(
        long,
        global = true,
        env = "CHITIN_COMPONENTS",
        value_delimiter = ':',
        value_name = "PATH"
    )]
    pub components: Vec<PathBuf>,

    /// The workspace: the directory components granted files may reach. Default: the current
    /// directory.
    #[arg(long, global = true, env = "CHITIN_WORKSPACE", value_name = "DIR")]
    pub workspace: Option<PathBuf>,

    /// Policy file (default: the built-in policies/default.toml).
    #[arg(long, global = true, env = "CHITIN_POLICY", value_name = "FILE")]
    pub policy: Option<PathBuf>,

    /// Trust store file (default: `<data dir>/trusted_keys`).
    #[arg(long, global = true, env = crate::signing_keys::TRUSTED_KEYS_ENV, value_name = "FILE")]
    pub trusted_keys: Option<PathBuf>,

    /// Keep the shared state (memory, secrets, approvals, pins, rate windows) in PostgreSQL,
    /// for replicas: postgres://USER@HOST:PORT/DB. A password belongs in the environment
    /// (CHITIN_STATE_URL or PGPASSWORD), never here. Default: the data directory's SQLite file.
    #[arg(long, global = true, env = crate::state_db::STATE_URL_ENV, value_name = "URL", hide_env_values = true)]
    pub state_url: Option<String>,

    /// Whether `state_url` came from the command line (where a password is refused).
    #[arg(skip)]
    pub state_url_on_argv: bool,

    /// More diagnostics on stderr (-v: info, -vv: debug). RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the loaded tools and their descriptions.
    List(list::Args),
    /// Call a tool with JSON arguments and print its JSON result.
    Call(call::Args),
    /// Print tool definitions ready to hand to an agent.
    Schema(schema::Args),
    /// Show a component's WIT imports and exports, hash and tool specs.
    Inspect(inspect::Args),
    /// Serve the tools to an agent over MCP (stdio, or Streamable HTTP with --http).
    Serve(serve::Args),
    /// Manage signing keys.
    Key(key::Args),
    /// Sign a component.
    Sign(sign::Args),
    /// Verify a component's signatures against the trust store.
    Verify(verify::Args),
    /// Manage the trust store: which keys may sign which components.
    Trust(trust::Args),
    /// Explain what the policy lets a tool do.
    Policy(policy::Args),
    /// List or revoke remembered approvals and pins.
    Approvals(approvals::Args),
    /// Report what a component is and could touch, before installing it.
    Audit(audit::Args),
    /// Check a manifest, or embed one into a component.
    #[command(subcommand)]
    Manifest(manifest::Command),
    /// Compose capability-free library components into a tool component, offline.
    Compose(compose::Args),
    /// Manage secrets: values the host injects into tools' HTTP requests (never shown to tools).
    Secret(secret::Args),
    /// Publish a signed component to a registry.
    Publish(publish::Args),
    /// Search the registries by name, description, tool or publisher.
    Search(search::Args),
    /// Install a component from a registry: verify, audit, approve, pin in the lockfile.
    Install(install::InstallArgs),
    /// Update installed components; a widened grant needs approval again.
    Update(install::UpdateArgs),
    /// Remove an installed component.
    Remove(install::RemoveArgs),
}

/// Run the CLI; returns the process exit code.
pub fn main() -> ExitCode {
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let mut cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    cli.state_url_on_argv =
        matches.value_source("state_url") == Some(clap::parser::ValueSource::CommandLine);
    init_tracing(cli.verbose);
    // The registry client's TLS uses the process-wide provider: ring, as the HTTP capability.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // One thread: `serve --http` answers concurrent calls on all cores from runtimes of its own
    // (see `mcp::lanes`); every other command needs one.
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            errln!("error: cannot start the async runtime: {e}");
            return Exit::Host.into();
        }
    };
    match rt.block_on(run(cli)) {
        Ok(code) => code.into(),
        Err(e) => {
            errln!("error: {e:#}");
            Exit::Host.into()
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<Exit> {
    match &cli.command {
        Command::List(args) => list::run(&cli, args).await,
        Command::Call(args) => call::run(&cli, args).await,
        Command::Schema(args) => schema::run(&cli, args).await,
        Command::Inspect(args) => inspect::run(&cli, args).await,
        Command::Serve(args) => serve::run(&cli, args).await,
        Command::Key(args) => key::run(&cli, args).await,
        Command::Sign(args) => sign::run(&cli, args).await,
        Command::Verify(args) => verify::run(&cli, args).await,
        Command::Trust(args) => trust::run(&cli, args).await,
        Command::Policy(args) => policy::run(&cli, args).await,
        Command::Approvals(args) => approvals::run(&cli, args).await,
        Command::Audit(args) => audit::run(&cli, args).await,
        Command::Manifest(cmd) => manifest::run(&cli, cmd).await,
        Command::Compose(args) => compose::run(&cli, args).await,
        Command::Secret(args) => secret::run(&cli, args).await,
        Command::Publish(args) => publish::run(&cli, args).await,
        Command::Search(args) => search::run(&cli, args).await,
        Command::Install(args) => install::install(&cli, args).await,
        Command::Update(args) => install::update(&cli, args).await,
        Command::Remove(args) => install::remove(&cli, args).await,
    }
}

fn init_tracing(verbose: u8) {
    // Progress (a first start's compiles) shows at every level.
    let default = match verbose {
        0 => "warn,chitin::progress=info",
        1 => "chitin_host=info,chitin::progress=info,warn",
        _ => "chitin_host=debug,info",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Diagnostics go to stderr: stdout carries results (and, when serving, the MCP protocol).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // A write that fails (nobody reads stderr) is dropped, never reported with a panic.
        .log_internal_errors(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}

/// Start a runtime with the operator's data directory, workspace and policy.
pub(crate) fn open_runtime(cli: &Cli) -> anyhow::Result<(Runtime, Policy, Arc<Services>)> {
    let data = DataDir::resolve(cli.data_dir.as_deref())?;
    let policy = load_policy(cli)?;
    let runtime = Runtime::new(&cache_root(cli, &data), &EngineOptions::default())?;
    let trust_path = trust_file(cli, &data);
    let workspace = workspace(cli, &data, &trust_path)?;
    let trust = chitin_registry::trust_store::TrustStore::load(&trust_path)?;
    let state = open_state(cli, &data)?;
    let services = Arc::new(Services::with_state(&workspace, data, state)?.with_trust(trust));
    Ok((runtime, policy, services))
}

/// A runtime for running a component with no capability at all (`chitin manifest embed`
/// recording its specs): the operator's compile cache and policy, and an empty workspace of its
/// own, since nothing is granted. The operator's workspace is not resolved, so a workspace that
/// would be refused for serving tools does not stop an author embedding a manifest. The
/// directory lives as long as the returned guard.
pub(crate) fn open_ungranted_runtime(
    cli: &Cli,
) -> anyhow::Result<(Runtime, Policy, Arc<Services>, tempfile::TempDir)> {
    let data = DataDir::resolve(cli.data_dir.as_deref())?;
    let policy = load_policy(cli)?;
    let runtime = Runtime::new(&cache_root(cli, &data), &EngineOptions::default())?;
    let empty = tempfile::tempdir().context("cannot create an empty workspace")?;
    let state = open_state(cli, &data)?;
    let services = Arc::new(Services::with_state(empty.path(), data, state)?);
    Ok((runtime, policy, services, empty))
}

/// The compile cache this invocation uses: `--cache-dir`, else the data directory's.
fn cache_root(cli: &Cli, data: &DataDir) -> PathBuf {
    cli.cache_dir.clone().unwrap_or_else(|| data.cache())
}

/// The state database this invocation uses: PostgreSQL when `--state-url` (or
/// `CHITIN_STATE_URL`) names one, else the data directory's SQLite file.
pub(crate) fn open_state(cli: &Cli, data: &DataDir) -> anyhow::Result<Arc<StateDb>> {
    let url = cli
        .state_url
        .as_deref()
        .map(|text| StateUrl::parse(text, cli.state_url_on_argv))
        .transpose()?;
    Ok(Arc::new(StateDb::open(
        &data.database(),
        &data.earlier_database(),
        url.as_ref(),
    )?))
}

/// The workspace this invocation serves: the one given, else the current directory; refused
/// when it is `/`, the home directory, or holds chitin's own state.
fn workspace(cli: &Cli, data: &DataDir, trust: &Path) -> anyhow::Result<PathBuf> {
    let (dir, defaulted) = match &cli.workspace {
        Some(dir) => (dir.clone(), false),
        None => (
            std::env::current_dir().context("cannot read the current directory")?,
            true,
        ),
    };
    let keys = crate::signing_keys::key_store(data);
    let (installed, registry, downloads) = (data.components(), data.registry(), data.downloads());
    // Its entries are machine code the host runs: a tool that could write one would escape
    // the sandbox.
    let cache = cache_root(cli, data);
    let state_path = |what, path, fix| StatePath {
        what,
        path,
        fix,
        may_hold_workspace: false,
    };
    let mut state = vec![
        // A workspace in a folder of its own there reaches nothing else of it.
        StatePath {
            may_hold_workspace: true,
            ..state_path("data directory", data.root(), "--data-dir DIR")
        },
        state_path(
            "trust store",
            trust,
            "--trusted-keys FILE (or --data-dir DIR)",
        ),
        state_path("signing keys", keys.dir(), "--data-dir DIR"),
        state_path("installed components", &installed, "--data-dir DIR"),
        state_path("local registry", &registry, "--data-dir DIR"),
        state_path("downloads", &downloads, "--data-dir DIR"),
        state_path(
            "compile cache",
            &cache,
            "--cache-dir DIR (or --data-dir DIR)",
        ),
    ];
    if let Some(policy) = &cli.policy {
        state.push(state_path("policy file", policy, "--policy FILE"));
    }
    Ok(crate::workspace::resolve(&dir, defaulted, &state)?)
}

/// The operator's policy: the file given, or the built-in default.
fn load_policy(cli: &Cli) -> anyhow::Result<Policy> {
    Ok(match &cli.policy {
        Some(path) => Policy::load(path)?,
        None => Policy::builtin()?,
    })
}

/// The trust store file this invocation uses.
pub(crate) fn trust_file(cli: &Cli, data: &DataDir) -> PathBuf {
    crate::signing_keys::trust_path(data, cli.trusted_keys.as_deref())
}

/// Start a host and load the configured components.
pub(crate) async fn open_host(cli: &Cli) -> anyhow::Result<Host> {
    open_host_with(cli, None).await
}

/// As [`open_host`], reusing `services` when given (a reload inside a running server).
pub(crate) async fn open_host_with(
    cli: &Cli,
    services: Option<Arc<Services>>,
) -> anyhow::Result<Host> {
    let started = std::time::Instant::now();
    let (runtime, policy, services) = match services {
        None => {
            let (runtime, policy, services) = open_runtime(cli)?;
            shared_set::sync_at_start(&services).await;
            (runtime, policy, services)
        }
        Some(services) => {
            let data = services.data_dir().clone();
            let runtime = Runtime::new(&cache_root(cli, &data), &EngineOptions::default())?;
            (runtime, load_policy(cli)?, services)
        }
    };
    let sources = component_sources(cli, services.data_dir());
    let installed = services.data_dir().components();
    let mut host = Host::new(runtime, policy, services);
    for source in &sources {
        // The installed-components folder exists from the first start: nothing installed yet
        // is an empty set of tools, and a server watching it sees the first install.
        if source == &installed && !source.exists() {
            std::fs::create_dir_all(source)
                .with_context(|| format!("cannot create {}", source.display()))?;
        }
        if !source.exists() {
            anyhow::bail!(
                "component source {} does not exist (run `just build-components`, or pass \
                 --components)",
                source.display()
            );
        }
        host.serve_path(source).await.map_err(|refused| {
            naming_trust_store(refused, &trust_file(cli, host.services().data_dir()))
        })?;
    }
    if host.components().is_empty() {
        let looked: Vec<String> = sources.iter().map(|s| s.display().to_string()).collect();
        let why = if cli.components.is_empty() {
            format!(" (nothing is installed, and there is no ./{BUILD_COMPONENTS_DIR} here)")
        } else {
            String::new()
        };
        errln!(
            "warning: no component was found in {}{why}: run `just build-components` in \
             chitin's repository, pass --components DIR, or `chitin install NAME`",
            looked.join(", ")
        );
    }
    for left in host.left_out() {
        errln!(
            "warning: component {} ({}) left out: {}",
            left.component,
            left.path.display(),
            left.reason
        );
    }
    crate::caps::process::announce(
        host.components()
            .iter()
            .filter_map(|c| c.grant.capabilities.process.as_deref()),
        host.services(),
        host.policy(),
    );
    let stats = host.runtime().cache_stats();
    host.runtime().cache().end_load();
    crate::heap::release_after_load(stats.compiled + stats.rebuilt > 0);
    tracing::info!(
        components = host.components().len(),
        tools = host.tools().count(),
        cache_hits = stats.hits,
        compiled = stats.compiled,
        rebuilt = stats.rebuilt,
        elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
        "host ready"
    );
    Ok(host)
}

/// A component refused because no key of the trust store signed it, with the store that was
/// read: a second shell or client with another `--data-dir` or `XDG_DATA_HOME` reads another
/// store, and the bare key id does not say so.
#[derive(Debug, thiserror::Error)]
#[error(
    "{refused} (the trust store read was {}; another is chosen by --trusted-keys, or by \
     --data-dir, CHITIN_DATA_DIR or XDG_DATA_HOME)",
    trust.display()
)]
struct UnknownSignerIn {
    refused: LoadError,
    trust: PathBuf,
}

/// `refused`, naming the trust store when the refusal is an unknown signer.
fn naming_trust_store(refused: LoadError, trust: &Path) -> anyhow::Error {
    match refused {
        LoadError::Signature {
            cause: SignatureError::UnknownSigner { .. },
            ..
        } => UnknownSignerIn {
            refused,
            trust: trust.to_owned(),
        }
        .into(),
        other => other.into(),
    }
}

/// The component sources: those named, else `build/components` when it exists and the
/// installed components when any are. With `--state-url` the installed components (the set the
/// replicas share) are served besides whatever is named.
fn component_sources(cli: &Cli, data: &DataDir) -> Vec<PathBuf> {
    if !cli.components.is_empty() {
        let mut sources = cli.components.clone();
        if cli.state_url.is_some() && !sources.contains(&data.components()) {
            sources.push(data.components());
        }
        return sources;
    }
    let built = Path::new(BUILD_COMPONENTS_DIR);
    let installed = data.components();
    let mut sources = Vec::new();
    if built.is_dir() {
        sources.push(built.to_owned());
    }
    if sources.is_empty()
        || cli.state_url.is_some()
        || crate::installed::Installed::is_managed(&installed)
    {
        sources.push(installed);
    }
    sources
}

/// Read call arguments: the text itself, or stdin when it is `-`.
pub(crate) fn read_args(text: &str) -> anyhow::Result<String> {
    if text == "-" {
        std::io::read_to_string(std::io::stdin()).context("cannot read arguments from stdin")
    } else {
        Ok(text.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_error_kind_has_its_exit_code() {
        let cases = [
            (ToolError::InvalidArgs(String::new()), 3),
            (ToolError::PermissionDenied(String::new()), 4),
            (ToolError::InvalidPath(String::new()), 4),
            (ToolError::RateLimited(String::new()), 4),
            (ToolError::ExecutionFailed(String::new()), 5),
            (ToolError::ExternalService(String::new()), 5),
            (ToolError::Timeout(String::new()), 6),
            (ToolError::NotFound(String::new()), 7),
            (ToolError::HostFault(String::new()), 1),
        ];
        for (error, code) in cases {
            assert_eq!(Exit::for_error(&error) as u8, code, "{}", error.kind());
        }
    }
}
