//! `chitin:host/process`: run a granted program on the host, confined.
//!
//! Enforcement, in order: the program must be one the grant names (resolved to an absolute path
//! at load); the working directory must lie inside the workspace; only environment keys the
//! grant allows may be set, on top of a scrubbed environment ([`env`]); at most
//! the policy's `[processes] max_running` processes run at once per host, at most
//! `max_running_per_user` of them for one OAuth user ([`crate::slots`]); the child gets its own process group,
//! resource limits, a seccomp filter that keeps it in the group, and a Landlock domain
//! ([`confine`]), applied in the child before `exec`, which starts without `fork` and without
//! any other descriptor of the host ([`spawn`]); stdout and stderr are capped and the group is
//! killed at the timeout or when the call is dropped ([`run`]).

pub mod confine;
pub mod env;
mod host;
pub mod run;
mod scratch;
pub mod spawn;

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use chitin_registry::manifest::ProcessGrant;
use wasmtime::component::{HasData, Linker};

use crate::call::Call;
use crate::capability::{Capability, CapabilityError, Cut, Holds, Load};
use crate::events::CallEvents;
use crate::policy::{Policy, ProcessPolicy};
use crate::services::Services;
use crate::slots::{Bounds, Counted, Slots};
use confine::{Plan, Rlimits, Rules, Support};
pub use scratch::Scratch;
use scratch::Scratches;

/// Timeout when the component names none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// What the process slots count.
const PROCESSES: Counted = Counted {
    noun: "processes",
    host_bound: "the policy's `[processes] max_running`",
    user_bound: "the policy's `[processes] max_running_per_user`",
};
/// The longest timeout a component may ask for.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(300);
/// The guest path of the workspace root (as the files capability preopens it).
pub const GUEST_WORKSPACE: &str = "/workspace";

/// Host bindings of `chitin:host/process`.
mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        inline: "package chitin:process-host;
                 world process-host { import chitin:host/process@0.1.0; }",
        imports: { default: async },
    });
}

/// What the host offers every process grant: the workspace, the data directory to keep out of
/// reach, the kernel's confinement support, the policy's stance on unconfined processes and its
/// concurrency limits, and the shared concurrency slots.
#[derive(Debug, Clone)]
pub struct ProcessHost {
    /// The workspace (canonical).
    pub workspace: PathBuf,
    /// The data directory, never reachable from a process.
    pub data_dir: PathBuf,
    /// What the kernel offers.
    pub support: Support,
    /// Whether the policy allows processes to run unconfined where Landlock is unavailable.
    pub allow_unconfined: bool,
    /// Resource limits applied to every process.
    pub rlimits: Rlimits,
    /// How many processes run at once, on the host and for one OAuth user.
    pub limits: Bounds,
    /// Concurrency slots shared by all components of the host.
    pub slots: Arc<Slots>,
}

impl ProcessHost {
    /// The defaults for `workspace` and `data_dir`: detected Landlock support, unconfined
    /// processes refused, default limits and concurrency, no slot taken.
    pub fn new(workspace: PathBuf, data_dir: PathBuf) -> Self {
        Self {
            workspace,
            data_dir,
            support: Support::detect(),
            allow_unconfined: false,
            rlimits: Rlimits::default(),
            limits: ProcessPolicy::default().bounds(),
            slots: Arc::new(Slots::new(PROCESSES)),
        }
    }

    /// The line the host prints at start about process confinement and concurrency.
    pub fn banner(&self) -> String {
        let Bounds { host, user } = self.limits;
        let confinement = self.confinement();
        format!(
            "{confinement}; at most {host} run at once, {user} of them for one OAuth user (the \
             policy's [processes])"
        )
    }

    /// How processes are confined, or why they are not.
    fn confinement(&self) -> String {
        match (self.support, self.allow_unconfined) {
            (Support::Landlock(_), _) => format!(
                "processes are confined with {} (files, TCP, signals), rlimits and seccomp",
                self.support.describe()
            ),
            (Support::Unavailable(_), true) => format!(
                "{}: the policy allows unconfined processes, so granted programs run with only \
                 rlimits, a scrubbed environment and the timeout",
                self.support.describe()
            ),
            (Support::Unavailable(_), false) => format!(
                "{}: components with a process grant will be refused (set \
                 `allow_unconfined_processes = true` in the policy to run them unconfined)",
                self.support.describe()
            ),
        }
    }
}

/// What processes run with is this capability's service; the core keeps it without knowing it.
impl Services {
    /// What processes run with: confinement support, limits and the shared concurrency slots.
    pub fn process(&self) -> Arc<ProcessHost> {
        let started = self.shared(|s| {
            Ok::<_, Infallible>(ProcessHost::new(
                s.workspace().to_owned(),
                s.data_dir().root().to_owned(),
            ))
        });
        match started {
            Ok(host) => host,
            Err(never) => match never {},
        }
    }
}

/// Say at start how processes are confined, when a loaded component may run any (`configs`:
/// each loaded component's process grant): a warning where they cannot be confined (they are
/// refused, or run unconfined by the policy's choice).
pub fn announce<'a>(
    mut configs: impl Iterator<Item = &'a ProcessConfig>,
    services: &Services,
    policy: &Policy,
) {
    let Some(config) = configs.next() else {
        return;
    };
    let banner = ProcessHost {
        allow_unconfined: policy.allow_unconfined_processes,
        limits: policy.processes.bounds(),
        ..(*services.process()).clone()
    }
    .banner();
    if config.is_confined() {
        tracing::info!("{banner}");
    } else {
        tracing::warn!("{banner}");
    }
    if let Some(warning) = unbounded_as(rustix::process::getuid().as_raw()) {
        tracing::warn!("{warning}");
    }
}

/// The warning for a host whose real user is `uid`, when the kernel bounds no process count
/// of that user: it applies `RLIMIT_NPROC` to every user but root.
fn unbounded_as(uid: u32) -> Option<&'static str> {
    (uid == 0).then_some(
        "chitin runs as root, whose processes the kernel does not count against RLIMIT_NPROC: \
         a fork flood in a granted program is bounded only by the call's timeout and the \
         process concurrency cap; run chitin as an ordinary user",
    )
}

/// Resolve a manifest's `[capabilities.process]` at load, under the policy's stance on
/// unconfined processes; `None` when the manifest asks for no processes.
pub fn configure(
    grant: Option<&ProcessGrant>,
    policy: &Policy,
    services: &Services,
) -> Result<Option<Arc<ProcessConfig>>, ProcessGrantError> {
    let Some(grant) = grant else {
        return Ok(None);
    };
    let host = ProcessHost {
        allow_unconfined: policy.allow_unconfined_processes,
        limits: policy.processes.bounds(),
        ..(*services.process()).clone()
    };
    ProcessConfig::resolve(grant, &host).map(|c| Some(Arc::new(c)))
}

/// A process grant could not be resolved at load.
#[derive(Debug, thiserror::Error)]
pub enum ProcessGrantError {
    /// A program is not on the host.
    #[error("process grant: program `{0}` is not an executable file on this host ({1})")]
    ProgramNotFound(String, String),
    /// An environment key is malformed or one the host sets itself.
    #[error(
        "process grant: environment key `{0}` is not allowed (it must match \
         [A-Za-z_][A-Za-z0-9_]* and not be HOME, TMPDIR or SHELL)"
    )]
    BadEnvKey(String),
    /// The workspace would expose what processes must never reach.
    #[error(
        "the workspace {workspace} contains {what} {path}, and processes get the whole \
         workspace; run chitin with a --workspace that does not contain it"
    )]
    WorkspaceTooWide {
        /// The workspace.
        workspace: PathBuf,
        /// What it contains.
        what: &'static str,
        /// Its path.
        path: PathBuf,
    },
}

/// A granted program.
#[derive(Debug, Clone)]
struct Program {
    /// As the grant names it.
    name: String,
    /// Absolute path on the host.
    path: PathBuf,
}

/// How processes of a grant are confined, decided at load.
#[derive(Debug)]
enum Mode {
    /// In a Landlock domain of these rules (and each call's scratch directory).
    Landlock(Rules),
    /// Unconfined, as the policy allows where Landlock is missing.
    Unconfined,
}

/// A component's resolved process grant.
#[derive(Debug)]
pub struct ProcessConfig {
    programs: Vec<Program>,
    env: Vec<String>,
    workspace: PathBuf,
    scratches: Arc<Scratches>,
    limits: Bounds,
    slots: Arc<Slots>,
}

impl ProcessConfig {
    /// Resolve `grant` against what `host` offers.
    pub fn resolve(grant: &ProcessGrant, host: &ProcessHost) -> Result<Self, ProcessGrantError> {
        let programs = grant
            .programs
            .iter()
            .map(|name| resolve_program(name))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(bad) = grant
            .env
            .iter()
            .find(|k| !env::is_valid_key(k) || env::HOST_SET.contains(&k.as_str()))
        {
            return Err(ProcessGrantError::BadEnvKey(bad.clone()));
        }
        // A workspace that exposes the data directory or a home refuses processes at run time
        // rather than failing the load: the component's other tools stay usable.
        let mode = match (
            check_workspace(&host.workspace, &host.data_dir),
            host.support,
        ) {
            (Err(why), _) => Err(why.to_string()),
            (Ok(()), Support::Landlock(abi)) => {
                let plan = Plan {
                    workspace: host.workspace.clone(),
                    workspace_writable: !grant.read_only,
                    programs: programs.iter().map(|p| p.path.clone()).collect(),
                    network: grant.network,
                };
                Ok(Mode::Landlock(Rules::new(&plan, abi)))
            }
            (Ok(()), Support::Unavailable(_)) if host.allow_unconfined => Ok(Mode::Unconfined),
            (Ok(()), Support::Unavailable(_)) => Err(format!(
                "{}, and the policy does not allow unconfined processes (set \
                 `allow_unconfined_processes = true` to accept the risk)",
                host.support.describe()
            )),
        };
        Ok(Self {
            programs,
            env: grant.env.clone(),
            workspace: host.workspace.clone(),
            scratches: Arc::new(Scratches::new(mode, host.rlimits)),
            limits: host.limits,
            slots: host.slots.clone(),
        })
    }

    /// Whether processes of this grant run inside a Landlock domain.
    pub fn is_confined(&self) -> bool {
        self.scratches.is_confined()
    }

    /// A scratch directory for one call, and the confinement of that call's processes: the
    /// workspace, the system directories and this scratch, and no other call's.
    pub fn scratch(&self) -> Result<Scratch, RunError> {
        self.scratches.take()
    }

    /// Check and run one request in a scratch directory of its own, removed when it ends.
    pub async fn run(&self, request: Request) -> Result<run::Finished, RunError> {
        let scratch = self.scratch()?;
        let finished = self.run_in(&scratch, request, None).await;
        scratch.retire();
        finished
    }

    /// Check and run one request of the call that owns `scratch`, made for the OAuth user
    /// `user` (`None`: the operator), whose processes [`Slots`] bounds.
    pub async fn run_in(
        &self,
        scratch: &Scratch,
        request: Request,
        user: Option<&Arc<str>>,
    ) -> Result<run::Finished, RunError> {
        let confinement = scratch.confinement();
        let program = self.program(&request.program)?;
        let cwd = self.cwd(request.cwd.as_deref())?;
        if let Some((key, _)) = request.env.iter().find(|(k, _)| !self.env.contains(k)) {
            return Err(RunError::EnvNotAllowed(format!(
                "`{key}` is not among the environment keys the grant allows ({})",
                if self.env.is_empty() {
                    "none".to_owned()
                } else {
                    self.env.join(", ")
                }
            )));
        }
        let _slot = self
            .slots
            .take(user, self.limits)
            .map_err(|busy| RunError::Busy(busy.0))?;
        let timeout = request
            .timeout
            .unwrap_or(DEFAULT_TIMEOUT)
            .clamp(Duration::from_millis(1), MAX_TIMEOUT);
        let spawn = run::Spawn {
            program: program.path.clone(),
            args: request.args,
            cwd,
            env: env::build(scratch.path(), &request.env),
            stdin: request.stdin,
            timeout,
        };
        run::run(spawn, confinement).await.map_err(|e| {
            RunError::SpawnFailed(format!("cannot start {}: {e}", program.path.display()))
        })
    }

    fn program(&self, asked: &str) -> Result<&Program, RunError> {
        let by_base = |p: &Program| {
            !asked.contains('/') && Path::new(&p.name).file_name().is_some_and(|f| f == asked)
        };
        self.programs
            .iter()
            .find(|p| p.name == asked || p.path.as_os_str() == asked || by_base(p))
            .ok_or_else(|| {
                let granted: Vec<&str> = self.programs.iter().map(|p| p.name.as_str()).collect();
                RunError::NotGranted(format!(
                    "`{asked}` is not a program this component may run (its grant names: {})",
                    if granted.is_empty() {
                        "none".to_owned()
                    } else {
                        granted.join(", ")
                    }
                ))
            })
    }

    fn cwd(&self, asked: Option<&str>) -> Result<PathBuf, RunError> {
        let asked = asked.unwrap_or("");
        let relative = match asked.strip_prefix(GUEST_WORKSPACE) {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => rest.trim_start_matches('/'),
            _ if asked.starts_with('/') => {
                return Err(RunError::InvalidCwd(format!(
                    "`{asked}` is outside the workspace; give a path relative to the workspace \
                     or under {GUEST_WORKSPACE}"
                )));
            }
            _ => asked,
        };
        let joined = self.workspace.join(relative);
        let canonical = joined.canonicalize().map_err(|e| {
            RunError::InvalidCwd(format!(
                "`{asked}` cannot be used as a working directory: {e}"
            ))
        })?;
        if !canonical.starts_with(&self.workspace) {
            return Err(RunError::InvalidCwd(format!(
                "`{asked}` resolves to {}, outside the workspace",
                canonical.display()
            )));
        }
        if !canonical.is_dir() {
            return Err(RunError::InvalidCwd(format!(
                "`{asked}` is not a directory"
            )));
        }
        Ok(canonical)
    }
}

/// One request from a component.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// The program, as the component names it.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Working directory (workspace-relative or under `/workspace`).
    pub cwd: Option<String>,
    /// Bytes for stdin.
    pub stdin: Vec<u8>,
    /// Wall-clock limit.
    pub timeout: Option<Duration>,
    /// Extra environment.
    pub env: Vec<(String, String)>,
}

/// Why a request was not run (the WIT `error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// Program not granted, or no grant.
    #[error("process refused: {0}")]
    NotGranted(String),
    /// Bad working directory.
    #[error("process refused: {0}")]
    InvalidCwd(String),
    /// Environment key not allowed.
    #[error("process refused: {0}")]
    EnvNotAllowed(String),
    /// Concurrency cap reached.
    #[error("process refused: {0}")]
    Busy(String),
    /// Processes cannot be confined here: no Landlock (and the policy does not waive it), or a
    /// workspace that would expose the data directory or a home.
    #[error("process refused: {0}")]
    Unconfined(String),
    /// Spawning failed.
    #[error("process failed: {0}")]
    SpawnFailed(String),
}

/// Resolve a granted program to an absolute path of an executable file.
fn resolve_program(name: &str) -> Result<Program, ProcessGrantError> {
    let not_found = |why: &str| ProcessGrantError::ProgramNotFound(name.to_owned(), why.to_owned());
    let path = if name.contains('/') {
        let path = PathBuf::from(name);
        if !path.is_absolute() {
            return Err(not_found("a program path must be absolute"));
        }
        path
    } else {
        let search = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
        std::env::split_paths(&search)
            .map(|dir| dir.join(name))
            .find(|p| is_executable(p))
            .ok_or_else(|| not_found("not found on PATH"))?
    };
    if !is_executable(&path) {
        return Err(not_found("missing or not executable"));
    }
    Ok(Program {
        name: name.to_owned(),
        path,
    })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Refuse a workspace that contains the data directory, the user's home (and so `/`) or the
/// temporary directory where scratches are made.
fn check_workspace(workspace: &Path, data_dir: &Path) -> Result<(), ProcessGrantError> {
    let too_wide = |what, path: &Path| ProcessGrantError::WorkspaceTooWide {
        workspace: workspace.to_owned(),
        what,
        path: path.to_owned(),
    };
    // Every call's private scratch (and the spare made for the next call) is made in the
    // temporary directory: inside the workspace, any call's processes would read and seed the
    // others'. Checked first, so the refusal names it wherever the data directory lies.
    let temp = std::env::temp_dir();
    let temp = temp.canonicalize().unwrap_or(temp);
    if temp.starts_with(workspace) {
        return Err(too_wide(
            "the temporary directory (TMPDIR) that holds each call's private scratch",
            &temp,
        ));
    }
    let data_dir = data_dir
        .canonicalize()
        .unwrap_or_else(|_| data_dir.to_owned());
    if data_dir.starts_with(workspace) {
        return Err(too_wide("chitin's data directory", &data_dir));
    }
    if let Some(home) = crate::workspace::homes()
        .into_iter()
        .find(|home| home.starts_with(workspace))
    {
        return Err(too_wide("the home directory", &home));
    }
    Ok(())
}

/// The per-call state of the process capability.
#[derive(Default)]
pub struct ProcessCtx {
    /// The component's resolved grant; none when it has no process grant.
    pub config: Option<Arc<ProcessConfig>>,
    /// Where the call's progress goes: a running process is reported every
    /// [`PROGRESS_EVERY`], so a long command shows it is alive.
    pub events: CallEvents,
    /// This call's scratch directory, made on its first process and removed with the call.
    pub scratch: Option<Scratch>,
    /// The OAuth user the call was made for, whose processes are bounded; `None` for the
    /// operator.
    pub user: Option<Arc<str>>,
}

impl Drop for ProcessCtx {
    /// The call is over: its scratch goes off the calling thread.
    fn drop(&mut self) {
        if let Some(scratch) = self.scratch.take() {
            scratch.retire();
        }
    }
}

/// How often a running process is reported as progress.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// The process capability (and its `HasData` marker).
pub struct Process;

impl HasData for Process {
    type Data<'a> = &'a mut ProcessCtx;
}

impl Capability for Process {
    type Section = ProcessGrant;
    type Config = Option<Arc<ProcessConfig>>;
    type Ctx = ProcessCtx;
    const LINKS: &'static [&'static str] = &["chitin:host/process@"];

    fn configure(
        section: Option<&ProcessGrant>,
        load: &Load<'_>,
        _cuts: &mut Vec<Cut>,
    ) -> Result<Self::Config, CapabilityError> {
        configure(section, load.policy, load.services).map_err(CapabilityError::new::<Self>)
    }

    fn ctx(config: &Self::Config, call: &Call<'_>) -> ProcessCtx {
        ProcessCtx {
            config: config.clone(),
            events: call.context.events.clone(),
            scratch: None,
            user: call.context.consenter.person().cloned(),
        }
    }

    fn add_to_linker<T: Holds<Self>>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
        fn get<T: Holds<Process>>(state: &mut T) -> &mut ProcessCtx {
            state.parts().0
        }
        bindings::chitin::host::process::add_to_linker::<T, Process>(linker, get)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_root_host_is_warned_that_its_processes_are_not_counted() {
        assert!(unbounded_as(0).is_some_and(|w| w.contains("RLIMIT_NPROC")));
        assert_eq!(unbounded_as(1000), None);
    }
}
