//! The host: a runtime plus the set of loaded components and the index of their tools.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chitin_registry::artifact::ContentHash;
use chitin_registry::manifest::{ApprovalHint, TaskHint};

use crate::approver::{ApprovalRequest, CallContext, Decision};
use crate::call::Position;
use crate::caps::invoke::{InvokeFuture, InvokeScope, Invoker};
use crate::error::{LoadError, ToolError};
use crate::grant::Grant;
use crate::installed::Installed;
use crate::library::LoadedLibrary;
use crate::pins::{PinError, PinStore};
use crate::policy::{ApprovalRules, Policy};
use crate::remembered_approvals::{Approval, ApprovalStore};
use crate::runtime::{CallReport, Loaded, LoadedComponent, Runtime};
use crate::services::Services;
use crate::slots::{Bounds, Counted, Slots};
use crate::spec::{CallArgs, ToolSpec};
use crate::state_db::StateError;

/// Loaded components and their tools, served through one runtime.
pub struct Host {
    /// Shared with the calls in flight, which invoke tools through it.
    served: Arc<ServedSet>,
}

struct ServedSet {
    runtime: Runtime,
    policy: Policy,
    services: Arc<Services>,
    components: Vec<LoadedComponent>,
    /// Library components, for the tools loaded after them to depend on.
    libraries: Vec<Arc<LoadedLibrary>>,
    /// Tool name → where it is served; a BTreeMap so listings are deterministic.
    index: BTreeMap<String, Served>,
    /// Third-party components a server left out because they could not load.
    left_out: Vec<LeftOut>,
    /// The top-level calls running, shared with every host on these services.
    call_slots: Arc<Slots>,
    /// How many of them may run at once, on the host and for one OAuth user.
    call_bounds: Bounds,
}

/// What the call slots count.
const CALLS: Counted = Counted {
    noun: "tool calls",
    host_bound: "the policy's `[calls] max_running`, within the engine's instance slots",
    user_bound: "the policy's `[calls] max_running_per_user`",
};

/// The top-level tool calls running are this host's service, counted across reloads.
impl Services {
    /// The slots of the top-level tool calls running.
    fn call_slots(&self) -> Arc<Slots> {
        let started = self.shared(|_| Ok::<_, std::convert::Infallible>(Slots::new(CALLS)));
        match started {
            Ok(slots) => slots,
            Err(never) => match never {},
        }
    }
}

/// Where a served tool is, and the policy's approval rules that name it (matched once, at load:
/// the policy does not change while the set is served).
struct Served {
    /// The component's index in [`ServedSet::components`].
    component: usize,
    /// The tool's index among the component's tools.
    tool: usize,
    /// The approval rules naming the tool.
    approval_rules: ApprovalRules,
}

/// A third-party component left out of a server because it could not load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    /// The file.
    pub path: PathBuf,
    /// `namespace/name` as its (unverified) manifest claims.
    pub component: String,
    /// Why it could not load.
    pub reason: String,
}

/// What a load does with a component that cannot load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnRefusal {
    /// Fail the whole load.
    Fail,
    /// Leave a third-party component out (and remember it); fail on a first-party one, or on a
    /// file whose manifest cannot be read (whose it is cannot be told).
    LeaveOutThirdParty,
}

impl Host {
    /// A host with no components yet, granting under `policy` from `services`.
    pub fn new(runtime: Runtime, policy: Policy, services: Arc<Services>) -> Self {
        let call_bounds = policy.calls.bounds(runtime.engine_report().instance_slots);
        Self {
            served: Arc::new(ServedSet {
                call_slots: services.call_slots(),
                call_bounds,
                runtime,
                policy,
                services,
                components: Vec::new(),
                libraries: Vec::new(),
                index: BTreeMap::new(),
                left_out: Vec::new(),
            }),
        }
    }

    /// The runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.served.runtime
    }

    /// The operator's policy.
    pub fn policy(&self) -> &Policy {
        &self.served.policy
    }

    /// The workspace, data directory and database.
    pub fn services(&self) -> &Arc<Services> {
        &self.served.services
    }

    /// The loaded components, in load order.
    pub fn components(&self) -> &[LoadedComponent] {
        &self.served.components
    }

    /// The library components loaded, in load order.
    pub fn libraries(&self) -> &[Arc<LoadedLibrary>] {
        &self.served.libraries
    }

    /// Third-party components [`Host::serve_path`] left out, in load order.
    pub fn left_out(&self) -> &[LeftOut] {
        &self.served.left_out
    }

    /// Load every `*.wasm` in `dir` (libraries first, so tools can depend on them; each group
    /// sorted by name) or the file `path`. Any component that cannot load fails the load.
    pub async fn load_path(&mut self, path: &Path) -> Result<(), LoadError> {
        self.load_source(path, OnRefusal::Fail).await
    }

    /// As [`Host::load_path`], as a server loads its sources: a third-party component (a
    /// namespace other than `chitin`) that cannot load — a name taken, a bad signature, a
    /// changed file — is left out and listed in [`Host::left_out`], so one publisher cannot
    /// keep the others' tools from loading; a first-party one still fails the load.
    pub async fn serve_path(&mut self, path: &Path) -> Result<(), LoadError> {
        self.load_source(path, OnRefusal::LeaveOutThirdParty).await
    }

    async fn load_source(&mut self, path: &Path, on_refusal: OnRefusal) -> Result<(), LoadError> {
        if Installed::is_managed(path) {
            return self.load_locked(path, on_refusal).await;
        }
        let files = if path.is_dir() {
            let (libraries, tools): (Vec<PathBuf>, Vec<PathBuf>) =
                wasm_files(path)?.into_iter().partition(|f| is_library(f));
            libraries.into_iter().chain(tools).collect()
        } else {
            vec![path.to_owned()]
        };
        for file in files {
            let this = Arc::get_mut(&mut self.served)
                .ok_or_else(|| LoadError::Busy { path: file.clone() })?;
            let bytes = std::fs::read(&file).map_err(|cause| LoadError::Read {
                path: file.clone(),
                cause,
            });
            let loaded = match bytes {
                Ok(bytes) => this.load_bytes(&file, &bytes).await,
                Err(e) => Err(e),
            };
            this.refused(&file, loaded, on_refusal)?;
        }
        Ok(())
    }

    /// Load the components the lockfile in `dir` lists, each checked against its pinned hash
    /// (libraries first). One already loaded from another source under the same name is
    /// skipped with a warning: the first source wins.
    pub async fn load_installed(&mut self, dir: &Path) -> Result<(), LoadError> {
        self.load_locked(dir, OnRefusal::Fail).await
    }

    async fn load_locked(&mut self, dir: &Path, on_refusal: OnRefusal) -> Result<(), LoadError> {
        let installed = Installed::new(dir);
        let lock = installed.lock().map_err(|cause| LoadError::Installed {
            path: dir.to_owned(),
            cause: Box::new(cause),
        })?;
        let mut files = Vec::new();
        for locked in &lock.components {
            let loaded = self
                .components()
                .iter()
                .filter_map(|c| c.grant.id().map(|id| (id.to_string(), c.path.clone())))
                .chain(self.libraries().iter().map(|l| (l.id(), l.path.clone())))
                .find(|(id, _)| id == &locked.name);
            if let Some((_, path)) = loaded {
                tracing::warn!(
                    component = %locked.name,
                    loaded_from = %path.display(),
                    "installed component not used: the same component is already loaded"
                );
                continue;
            }
            let read = installed
                .read(locked)
                .map_err(|cause| LoadError::Installed {
                    path: installed.file(locked),
                    cause: Box::new(cause),
                });
            match read {
                Ok(bytes) => files.push((installed.file(locked), bytes)),
                Err(e) => {
                    let this = Arc::get_mut(&mut self.served).ok_or_else(|| LoadError::Busy {
                        path: installed.file(locked),
                    })?;
                    this.leave_out_or_fail(&installed.file(locked), &locked.name, e, on_refusal)?;
                }
            }
        }
        files.sort_by_key(|(_, bytes)| !manifest_is_library(bytes));
        for (path, bytes) in files {
            let this = Arc::get_mut(&mut self.served)
                .ok_or_else(|| LoadError::Busy { path: path.clone() })?;
            let loaded = this.load_bytes(&path, &bytes).await;
            this.refused(&path, loaded, on_refusal)?;
        }
        Ok(())
    }

    /// Load one component file and index its tools. A tool name already taken is refused.
    pub async fn load_file(&mut self, path: &Path) -> Result<(), LoadError> {
        // Calls hold the served set only while they run, and `&mut self` means none is running.
        let this = Arc::get_mut(&mut self.served).ok_or_else(|| LoadError::Busy {
            path: path.to_owned(),
        })?;
        this.load_file(path).await
    }

    /// Every tool, sorted by name.
    pub fn tools(&self) -> impl Iterator<Item = &ToolSpec> {
        self.served.tools()
    }

    /// The spec of tool `name`.
    pub fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.served.tool(name)
    }

    /// Whether tool `name`'s input schema asks for `Mcp-Param-*` headers (`x-mcp-header`);
    /// false when no such tool is served.
    pub fn names_param_headers(&self, name: &str) -> bool {
        self.served.index.get(name).is_some_and(|served| {
            self.served.components[served.component].tools[served.tool].names_param_headers
        })
    }

    /// The wall-clock limit of a call to tool `name` when its component's manifest asks for a
    /// time limit of its own (the grant's, so as the policy clamps it); `None` when it does not,
    /// or no such tool is served.
    pub fn asked_time_limit(&self, name: &str) -> Option<std::time::Duration> {
        let c = self.served.index.get(name)?.component;
        let grant = &self.served.components[c].grant;
        let asked = grant.manifest.as_ref()?.limits.timeout_ms;
        asked.map(|_| grant.limits.timeout())
    }

    /// The wall-clock limit of a call to tool `name` (its grant's), if such a tool is served.
    pub fn time_limit(&self, name: &str) -> Option<std::time::Duration> {
        let c = self.served.index.get(name)?.component;
        Some(self.served.components[c].grant.limits.timeout())
    }

    /// Whether tool `name`'s manifest says it runs only as an MCP task (`task = "required"`).
    pub fn task_required(&self, name: &str) -> bool {
        let Some(&Served {
            component: c,
            tool: t,
            ..
        }) = self.served.index.get(name)
        else {
            return false;
        };
        let component = &self.served.components[c];
        component.grant.manifest.as_ref().is_some_and(|m| {
            m.tools
                .get(&component.tools[t].own_name)
                .is_some_and(|hints| hints.task == TaskHint::Required)
        })
    }

    /// Call tool `name` with `args_json` in a fresh sandbox as the local user, with nobody to
    /// approve. Runs inside a Tokio runtime with timers enabled (the wall-clock timeout uses
    /// them).
    pub async fn call(&self, name: &str, args_json: &str) -> CallReport {
        self.call_in(name, args_json, &CallContext::default()).await
    }

    /// Call tool `name` with `args_json` for the caller in `ctx`, asking its approver first when
    /// the tool needs approval.
    pub async fn call_in(&self, name: &str, args_json: &str, ctx: &CallContext) -> CallReport {
        let invoker: Arc<dyn Invoker> = self.served.clone();
        let top = Position::Top {
            invoker: &invoker,
            tool: name,
            ctx,
        };
        self.served.call_scoped(name, args_json, top).await
    }
}

impl Invoker for ServedSet {
    fn invoke(
        self: Arc<Self>,
        tool: String,
        args_json: String,
        scope: InvokeScope,
    ) -> InvokeFuture {
        Box::pin(async move {
            self.call_scoped(&tool, &args_json, Position::Within(&scope))
                .await
                .result
                .map(|out| out.text)
        })
    }
}

impl ServedSet {
    /// Pass on the outcome of loading `path`, leaving a third-party component out when
    /// `on_refusal` allows.
    fn refused(
        &mut self,
        path: &Path,
        loaded: Result<(), LoadError>,
        on_refusal: OnRefusal,
    ) -> Result<(), LoadError> {
        let Err(error) = loaded else {
            return Ok(());
        };
        // Whose it claims to be, unverified: only used to choose between leaving it out and
        // failing, and a false claim of the first-party namespace only fails the start.
        let claimed = std::fs::read(path)
            .ok()
            .and_then(|bytes| {
                chitin_registry::manifest::Manifest::from_artifact(&bytes)
                    .ok()
                    .flatten()
            })
            .map(|m| m.id());
        match claimed {
            Some(id) => self.leave_out_or_fail(path, &id, error, on_refusal),
            None => Err(error),
        }
    }

    /// Leave component `id` (at `path`, refused with `error`) out when it is third-party and
    /// `on_refusal` allows; otherwise fail with `error`.
    fn leave_out_or_fail(
        &mut self,
        path: &Path,
        id: &str,
        error: LoadError,
        on_refusal: OnRefusal,
    ) -> Result<(), LoadError> {
        let first_party = id
            .split_once('/')
            .is_none_or(|(namespace, _)| namespace == crate::policy::FIRST_PARTY);
        if on_refusal == OnRefusal::Fail || first_party {
            return Err(error);
        }
        tracing::debug!(component = %id, %error, "third-party component left out");
        self.left_out.push(LeftOut {
            path: path.to_owned(),
            component: id.to_owned(),
            reason: error.to_string(),
        });
        Ok(())
    }

    async fn load_file(&mut self, path: &Path) -> Result<(), LoadError> {
        let bytes = std::fs::read(path).map_err(|cause| LoadError::Read {
            path: path.to_owned(),
            cause,
        })?;
        self.load_bytes(path, &bytes).await
    }

    async fn load_bytes(&mut self, path: &Path, bytes: &[u8]) -> Result<(), LoadError> {
        let loaded = self
            .runtime
            .load_any(path, bytes, &self.policy, &self.services, &self.libraries)
            .await?;
        let component = match loaded {
            Loaded::Tool(component) => *component,
            Loaded::Library(library) => {
                self.check_pin(path, &library.grant, &library.hash, &library.signer)?;
                tracing::info!(library = %library.id(), hash = %library.hash, "library loaded");
                self.libraries.push(library);
                return Ok(());
            }
        };
        let namespace = component
            .grant
            .manifest
            .as_ref()
            .map(|m| m.component.namespace.clone());
        if namespace.as_deref() != Some(crate::policy::FIRST_PARTY)
            && let Some(tool) = component
                .tools
                .iter()
                .find(|t| self.policy.is_protected(&t.spec.name))
        {
            return Err(LoadError::ProtectedName {
                path: path.to_owned(),
                tool: tool.spec.name.clone(),
                component: component.name(),
            });
        }
        let slot = self.components.len();
        for (i, tool) in component.tools.iter().enumerate() {
            if let Some(&Served {
                component: other, ..
            }) = self.index.get(&tool.spec.name)
            {
                return Err(LoadError::DuplicateTool {
                    tool: tool.spec.name.clone(),
                    first: self.components[other].path.clone(),
                    second: path.to_owned(),
                });
            }
            if component.tools[..i]
                .iter()
                .any(|t| t.spec.name == tool.spec.name)
            {
                return Err(LoadError::BadSpec {
                    path: path.to_owned(),
                    tool: tool.spec.name.clone(),
                    reason: "listed twice by the component".into(),
                });
            }
        }
        // Pinned only once nothing else refuses it.
        self.check_pin(path, &component.grant, &component.hash, &component.signer)?;
        for (i, tool) in component.tools.iter().enumerate() {
            // Tools the policy does not offer are loaded but never listed or callable.
            match self.policy.tool_verdict(&tool.spec.name) {
                crate::policy::ToolVerdict::Offered(_) => {
                    let served = Served {
                        component: slot,
                        tool: i,
                        approval_rules: self.policy.approval_rules_for(&tool.spec.name),
                    };
                    self.index.insert(tool.spec.name.clone(), served);
                }
                verdict => tracing::info!(tool = %tool.spec.name, ?verdict, "tool not offered"),
            }
        }
        tracing::info!(
            component = %component.name(),
            hash = %component.hash,
            cache = ?component.cache,
            tools = component.tools.len(),
            "component loaded"
        );
        self.components.push(component);
        Ok(())
    }

    /// Check a component about to be served against the pin of its name, and pin it: no
    /// replayed older version and no silent widening, whatever folder it comes from. Where a
    /// lockfile manages the installed folder, the lockfile is the pin of what it lists.
    fn check_pin(
        &self,
        path: &Path,
        grant: &Grant,
        hash: &ContentHash,
        signer: &str,
    ) -> Result<(), LoadError> {
        let Some(manifest) = &grant.manifest else {
            return Ok(());
        };
        let installed = self.services.data_dir().components();
        if path.starts_with(&installed) && Installed::is_managed(&installed) {
            return Ok(());
        }
        let pin = |cause| LoadError::Pin {
            path: path.to_owned(),
            cause,
        };
        match PinStore::new(self.services.state().clone()).check_and_pin(
            manifest,
            &hash.to_string(),
            signer,
        ) {
            // A database file that is not a database, or that cannot be opened at all, holds no
            // pin to check against (as if it were absent, which whoever could break it could
            // also arrange): the component loads unpinned, so a broken database fails only the
            // calls that need it. A pin record that does not parse, or a database busy with
            // another process, still refuses the load.
            Err(PinError::Database(e))
                if matches!(
                    *e,
                    StateError::Corrupt { .. } | StateError::Unreachable { .. }
                ) =>
            {
                tracing::warn!(
                    component = %manifest.id(),
                    error = %e,
                    "pins cannot be read: loading the component without checking its pin"
                );
                Ok(())
            }
            other => other.map_err(pin),
        }
    }

    fn tools(&self) -> impl Iterator<Item = &ToolSpec> {
        self.index
            .values()
            .map(|served| &self.components[served.component].tools[served.tool].spec)
    }

    fn tool(&self, name: &str) -> Option<&ToolSpec> {
        let served = self.index.get(name)?;
        Some(&self.components[served.component].tools[served.tool].spec)
    }

    /// Call tool `name` as the link of an invocation chain that `scope` ends with: the policy
    /// decides whether it is offered and asks the caller's approver when it needs approval.
    async fn call_scoped(&self, name: &str, args_json: &str, at: Position<'_>) -> CallReport {
        let ctx = at.ctx();
        let Some(served) = self.index.get(name) else {
            return CallReport::refused(ToolError::NotFound(self.unknown_tool(name)));
        };
        // Taken before a person is asked, so nobody approves a call that cannot run; calls a
        // tool invokes are part of their top-level call's slot.
        let _slot = match at {
            Position::Top { .. } => {
                match self
                    .call_slots
                    .take(ctx.consenter.person(), self.call_bounds)
                {
                    Ok(slot) => Some(slot),
                    Err(busy) => return CallReport::refused(ToolError::RateLimited(busy.0)),
                }
            }
            Position::Within(_) => None,
        };
        let (component, t) = (&self.components[served.component], served.tool);
        let args = CallArgs::parse(args_json);
        let (mode, why) = self.policy.approval_mode_among(
            &served.approval_rules,
            args.value(),
            component.grant.approval(&component.tools[t].own_name),
        );
        if mode != ApprovalHint::Never {
            // Validate first so a person is only ever asked about a call that can run.
            if let Err(e) = component.validate_args(t, &args) {
                return CallReport::refused(e);
            }
            if let Err(e) = self
                .approve(component, name, mode, &why, args_json, ctx)
                .await
            {
                return CallReport::refused(e);
            }
        }
        self.runtime
            .call(component, t, &args, &self.services, at)
            .await
    }

    /// Ask for approval of a call to `tool` (mode `ask` or `always`), unless an "always allow"
    /// for this artifact and grant is remembered; remember a new one when given.
    async fn approve(
        &self,
        component: &LoadedComponent,
        tool: &str,
        mode: ApprovalHint,
        why: &str,
        args_json: &str,
        ctx: &CallContext,
    ) -> Result<(), ToolError> {
        let store = ApprovalStore::new(self.services.state().clone());
        let hash = component.hash.to_string();
        let grant = component.grant_digest().to_owned();
        let remembered = || {
            store
                .covers(
                    &component.name(),
                    tool,
                    &hash,
                    &grant,
                    ctx.consenter.holder(),
                )
                .map_err(|e| ToolError::HostFault(e.to_string()))
        };
        if mode == ApprovalHint::Ask && remembered()? {
            return Ok(());
        }
        let request = ApprovalRequest {
            tool: tool.to_owned(),
            component: component.name(),
            reason: format!(
                "{why} asks for approval ({})",
                format!("{mode:?}").to_lowercase()
            ),
            args_json: args_json.to_owned(),
        };
        match ctx.approver.approve(&request).await {
            Decision::Denied(why) => Err(ToolError::PermissionDenied(why)),
            Decision::Approved => Ok(()),
            Decision::ApprovedAlways => {
                if mode == ApprovalHint::Ask {
                    let approval = Approval {
                        component: component.name(),
                        tool: tool.to_owned(),
                        version: component
                            .grant
                            .manifest
                            .as_ref()
                            .map(|m| m.component.version.to_string())
                            .unwrap_or_default(),
                        hash,
                        grant,
                        user: ctx.user.to_string(),
                        holder: ctx.consenter.holder().map(str::to_owned),
                        approved_at: crate::remembered_approvals::now(),
                    };
                    store
                        .remember(&approval)
                        .map_err(|e| ToolError::HostFault(e.to_string()))?;
                }
                Ok(())
            }
        }
    }

    fn unknown_tool(&self, name: &str) -> String {
        let known: Vec<&str> = self.index.keys().map(String::as_str).collect();
        if known.is_empty() {
            format!("no tool named `{name}`: no components are loaded")
        } else {
            format!("no tool named `{name}`; loaded tools: {}", known.join(", "))
        }
    }
}

/// Whether the manifest embedded in `file` declares a library. Unreadable files count as
/// tools: loading them reports what is wrong.
fn is_library(file: &Path) -> bool {
    std::fs::read(file).is_ok_and(|bytes| manifest_is_library(&bytes))
}

/// Whether the manifest embedded in `bytes` declares a library.
fn manifest_is_library(bytes: &[u8]) -> bool {
    chitin_registry::manifest::Manifest::from_artifact(bytes)
        .ok()
        .flatten()
        .is_some_and(|m| m.component.kind == chitin_registry::manifest::ComponentKind::Library)
}

/// The `*.wasm` files in `dir`, sorted by name.
fn wasm_files(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let list_err = |cause| LoadError::ListDir {
        path: dir.to_owned(),
        cause,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(list_err)? {
        let path = entry.map_err(list_err)?.path();
        if path.extension().is_some_and(|e| e == "wasm") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}
