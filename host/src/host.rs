//! The host: a runtime plus the set of loaded components and the index of their tools.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chitin_registry::manifest::ApprovalHint;

use crate::approval::{ApprovalRequest, CallContext, Decision};
use crate::approvals::{Approval, ApprovalStore};
use crate::caps::invoke::{InvokeFuture, InvokeScope, Invoker};
use crate::error::{LoadError, ToolError};
use crate::installed::Installed;
use crate::library::LoadedLibrary;
use crate::policy::Policy;
use crate::runtime::{CallReport, Loaded, LoadedComponent, Runtime};
use crate::services::Services;
use crate::spec::ToolSpec;

/// Loaded components and their tools, served through one runtime.
pub struct Host {
    /// Shared with the calls in flight, which invoke tools through it.
    inner: Arc<Inner>,
}

struct Inner {
    runtime: Runtime,
    policy: Policy,
    services: Arc<Services>,
    components: Vec<LoadedComponent>,
    /// Library components, for the tools loaded after them to depend on.
    libraries: Vec<Arc<LoadedLibrary>>,
    /// Tool name → (component index, tool index); a BTreeMap so listings are deterministic.
    index: BTreeMap<String, (usize, usize)>,
}

impl Host {
    /// A host with no components yet, granting under `policy` from `services`.
    pub fn new(runtime: Runtime, policy: Policy, services: Arc<Services>) -> Self {
        Self {
            inner: Arc::new(Inner {
                runtime,
                policy,
                services,
                components: Vec::new(),
                libraries: Vec::new(),
                index: BTreeMap::new(),
            }),
        }
    }

    /// The runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    /// The operator's policy.
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }

    /// The workspace, data directory and database.
    pub fn services(&self) -> &Arc<Services> {
        &self.inner.services
    }

    /// The loaded components, in load order.
    pub fn components(&self) -> &[LoadedComponent] {
        &self.inner.components
    }

    /// The library components loaded, in load order.
    pub fn libraries(&self) -> &[Arc<LoadedLibrary>] {
        &self.inner.libraries
    }

    /// Load every `*.wasm` in `dir` (libraries first, so tools can depend on them; each group
    /// sorted by name) or the file `path`.
    pub async fn load_path(&mut self, path: &Path) -> Result<(), LoadError> {
        if Installed::is_managed(path) {
            return self.load_installed(path).await;
        }
        if path.is_dir() {
            let (libraries, tools): (Vec<PathBuf>, Vec<PathBuf>) =
                wasm_files(path)?.into_iter().partition(|f| is_library(f));
            for file in libraries.iter().chain(&tools) {
                self.load_file(file).await?;
            }
            Ok(())
        } else {
            self.load_file(path).await
        }
    }

    /// Load the components the lockfile in `dir` lists, each checked against its pinned hash
    /// (libraries first). One already loaded from another source under the same name is
    /// skipped with a warning: the first source wins.
    pub async fn load_installed(&mut self, dir: &Path) -> Result<(), LoadError> {
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
                .filter_map(|c| c.grant.id().map(|id| (id, c.path.clone())))
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
            let bytes = installed
                .read(locked)
                .map_err(|cause| LoadError::Installed {
                    path: installed.file(locked),
                    cause: Box::new(cause),
                })?;
            files.push((installed.file(locked), bytes));
        }
        files.sort_by_key(|(_, bytes)| !manifest_is_library(bytes));
        for (path, bytes) in files {
            let this = Arc::get_mut(&mut self.inner)
                .ok_or_else(|| LoadError::Busy { path: path.clone() })?;
            this.load_bytes(&path, &bytes).await?;
        }
        Ok(())
    }

    /// Load one component file and index its tools. A tool name already taken is refused.
    pub async fn load_file(&mut self, path: &Path) -> Result<(), LoadError> {
        // Calls hold the inner host only while they run, and `&mut self` means none is running.
        let this = Arc::get_mut(&mut self.inner).ok_or_else(|| LoadError::Busy {
            path: path.to_owned(),
        })?;
        this.load_file(path).await
    }

    /// Every tool, sorted by name.
    pub fn tools(&self) -> impl Iterator<Item = &ToolSpec> {
        self.inner.tools()
    }

    /// The spec of tool `name`.
    pub fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.inner.tool(name)
    }

    /// The wall-clock limit of a call to tool `name` when its component's manifest asks for a
    /// time limit of its own (the grant's, so as the policy clamps it); `None` when it does not,
    /// or no such tool is served.
    pub fn asked_time_limit(&self, name: &str) -> Option<std::time::Duration> {
        let &(c, _) = self.inner.index.get(name)?;
        let grant = &self.inner.components[c].grant;
        let asked = grant.manifest.as_ref()?.limits.timeout_ms;
        asked.map(|_| grant.limits.timeout())
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
        let invoker: Arc<dyn Invoker> = self.inner.clone();
        let scope = InvokeScope::root(invoker, name, ctx);
        self.inner.call_scoped(name, args_json, &scope).await
    }
}

impl Invoker for Inner {
    fn invoke(
        self: Arc<Self>,
        tool: String,
        args_json: String,
        scope: InvokeScope,
    ) -> InvokeFuture {
        Box::pin(async move {
            self.call_scoped(&tool, &args_json, &scope)
                .await
                .result
                .map(|out| out.text)
        })
    }
}

impl Inner {
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
            Loaded::Tool(component) => component,
            Loaded::Library(library) => {
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
            if let Some(&(other, _)) = self.index.get(&tool.spec.name) {
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
        for (i, tool) in component.tools.iter().enumerate() {
            // Tools the policy does not offer are loaded but never listed or callable.
            match self.policy.tool_verdict(&tool.spec.name) {
                crate::policy::ToolVerdict::Offered(_) => {
                    self.index.insert(tool.spec.name.clone(), (slot, i));
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

    fn tools(&self) -> impl Iterator<Item = &ToolSpec> {
        self.index
            .values()
            .map(|&(c, t)| &self.components[c].tools[t].spec)
    }

    fn tool(&self, name: &str) -> Option<&ToolSpec> {
        let &(c, t) = self.index.get(name)?;
        Some(&self.components[c].tools[t].spec)
    }

    /// Call tool `name` as the link of an invocation chain that `scope` ends with: the policy
    /// decides whether it is offered and asks the caller's approver when it needs approval.
    async fn call_scoped(&self, name: &str, args_json: &str, scope: &InvokeScope) -> CallReport {
        let ctx = &scope.ctx;
        let Some(&(c, t)) = self.index.get(name) else {
            return CallReport::refused(ToolError::NotFound(self.unknown_tool(name)));
        };
        let component = &self.components[c];
        let args = serde_json::from_str(args_json).unwrap_or(serde_json::Value::Null);
        let (mode, why) = self.policy.approval_mode(
            name,
            &args,
            component.grant.approval(&component.tools[t].own_name),
        );
        if mode != ApprovalHint::Never {
            // Validate first so a person is only ever asked about a call that can run.
            if let Err(e) = component.tools[t].validate_args(args_json) {
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
            .call(component, t, args_json, &self.services, scope)
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
        let grant = component.grant.digest();
        let remembered = || {
            store
                .covers(&component.name(), tool, &hash, &grant)
                .map_err(|e| ToolError::ExecutionFailed(e.to_string()))
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
                        user: ctx.user.clone(),
                        approved_at: crate::approvals::now(),
                    };
                    store
                        .remember(&approval)
                        .map_err(|e| ToolError::ExecutionFailed(e.to_string()))?;
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
    chitin_registry::artifact::manifest_text(bytes)
        .ok()
        .flatten()
        .and_then(|text| chitin_registry::manifest::Manifest::parse(text).ok())
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
