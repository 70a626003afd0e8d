//! The runtime: one engine, one shared linker, the compile cache and the epoch ticker. Loads
//! components (the steps of [`crate::load`]) and runs calls in fresh sandboxes.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chitin_registry::artifact::ContentHash;
use wasmtime::Engine;
use wasmtime::component::Linker;
use wasmtime::component::types::ComponentItem;

use crate::approver::CallContext;
use crate::cache::{CacheCounts, CacheError, CacheOutcome, CompileCache};
use crate::call::CallTarget;
use crate::call::Position;
use crate::caps::log::LogRecord;
use crate::contract::Shape;
use crate::engine::{self, EngineOptions, EngineReport, EpochTicker};
use crate::error::{LoadError, StepError, ToolError, at};
use crate::grant::Grant;
use crate::leak::{LeakScanner, Scrubbed};
use crate::library::LoadedLibrary;
pub use crate::load::LibraryUse;
use crate::load::{self, Entry, InstantiateError, Loader, SpecsError};
use crate::policy::Policy;
use crate::sandbox::{self, ToolPre};
use crate::services::Services;
use crate::spec::{CallArgs, CheckedSpec};
use crate::state::{CallEnv, HostState};
use crate::typed_exports::{self, Docs};

/// The runtime could not start.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// wasmtime rejected the engine configuration.
    #[error("cannot create the WebAssembly engine: {0}")]
    Engine(String),
    /// The host's own capabilities could not be linked (a host bug).
    #[error("cannot link host capabilities: {0}")]
    Link(String),
    /// The compile cache could not be opened.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// The epoch ticker thread could not be started.
    #[error("cannot start the epoch ticker: {0}")]
    Ticker(std::io::Error),
}

/// The engine, linker, compile cache and epoch ticker shared by all components.
pub struct Runtime {
    engine: Engine,
    linker: Linker<HostState>,
    cache: CompileCache,
    report: EngineReport,
    _ticker: EpochTicker,
}

/// A component ready to run: pre-linked, with its checked tool specs.
pub struct LoadedComponent {
    /// Where it was loaded from.
    pub path: PathBuf,
    /// Its content hash.
    pub hash: ContentHash,
    /// Whether it came from the compile cache.
    pub cache: CacheOutcome,
    /// Its tools, in the order the component lists them.
    pub tools: Vec<CheckedSpec>,
    /// What it may use.
    pub grant: Arc<Grant>,
    /// The fingerprint of the trusted key that signed it.
    pub signer: String,
    /// The libraries it was composed with or linked to, and how.
    pub libraries: Vec<(Arc<LoadedLibrary>, LibraryUse)>,
    /// [`Grant::digest`] of `grant`, computed once: remembered approvals are looked up by it on
    /// every call of an `ask` tool.
    grant_digest: String,
    entry: Entry,
}

/// What a component file turned out to be.
pub enum Loaded {
    /// A tool component, ready to call.
    Tool(Box<LoadedComponent>),
    /// A library for tool components to import.
    Library(Arc<LoadedLibrary>),
}

impl LoadedComponent {
    /// The digest of its effective grant ([`Grant::digest`]).
    pub fn grant_digest(&self) -> &str {
        &self.grant_digest
    }

    /// Check the arguments of a call to tool `index` without running anything: a typed
    /// export's by converting them to its parameters (errors name the field), any other tool's
    /// against its input schema.
    pub fn validate_args(&self, index: usize, args: &CallArgs<'_>) -> Result<(), ToolError> {
        let unknown = || ToolError::NotFound(format!("{} has no tool number {index}", self.name()));
        match &self.entry {
            Entry::Typed(_, funcs) => {
                let func = funcs.get(index).ok_or_else(unknown)?;
                typed_exports::arguments(func, args.json()).map(|_| ())
            }
            Entry::Tool(_) => self
                .tools
                .get(index)
                .ok_or_else(unknown)?
                .validate_args(args),
        }
    }

    /// The component's name: `namespace/name` from its manifest, else its file stem.
    pub fn name(&self) -> String {
        self.grant.id().map(|id| id.to_string()).unwrap_or_else(|| {
            self.path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
    }
}

/// What one tool call produced.
#[derive(Debug)]
pub struct CallReport {
    /// The result: the tool's JSON output, or why it failed.
    pub result: Result<CallOutput, ToolError>,
    /// The call's log (log import, stdout, stderr), bounded.
    pub log: LogRecord,
    /// Fuel burned.
    pub fuel_used: u64,
    /// Wall-clock time of the sandboxed run.
    pub duration: Duration,
    /// The sandbox stopped the instance (trap, memory, fuel): the tool crashed rather than
    /// reported an error.
    pub crashed: bool,
}

/// A successful tool result as handed to the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallOutput {
    /// The result text: the tool's JSON, or its first bytes plus a truncation marker.
    pub text: String,
    /// The full size in bytes when the result was cut to the output cap.
    pub truncated_from: Option<usize>,
}

impl CallReport {
    /// A call refused before any sandbox ran (unknown tool, invalid arguments).
    pub fn refused(error: ToolError) -> Self {
        Self {
            result: Err(error),
            log: LogRecord::default(),
            fuel_used: 0,
            duration: Duration::ZERO,
            crashed: false,
        }
    }
}

impl CallOutput {
    /// The result as JSON, when it was not truncated and parses.
    pub fn json(&self) -> Option<serde_json::Value> {
        if self.truncated_from.is_some() {
            return None;
        }
        serde_json::from_str(&self.text).ok()
    }
}

impl Runtime {
    /// Start a runtime whose compile cache lives under `cache_root`.
    pub fn new(cache_root: &Path, options: &EngineOptions) -> Result<Self, RuntimeError> {
        let (engine, report) =
            engine::build(options).map_err(|e| RuntimeError::Engine(format!("{e:#}")))?;
        let mut linker = Linker::new(&engine);
        crate::caps::add_to_linker(&mut linker)
            .map_err(|e| RuntimeError::Link(format!("{e:#}")))?;
        let cache = CompileCache::open(cache_root, &engine)?;
        let ticker = EpochTicker::start(&engine).map_err(RuntimeError::Ticker)?;
        Ok(Self {
            engine,
            linker,
            cache,
            report,
            _ticker: ticker,
        })
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// What allocator the engine ended up with.
    pub fn engine_report(&self) -> EngineReport {
        self.report
    }

    /// Compile cache counters.
    pub fn cache_stats(&self) -> CacheCounts {
        self.cache.stats()
    }

    /// The compile cache.
    pub fn cache(&self) -> &CompileCache {
        &self.cache
    }

    /// Load a component file: check it is a component, resolve its manifest's grant against
    /// `policy`, compile (or load from cache), check its contract, pre-link it, and ask it for
    /// its tool specs.
    pub async fn load(
        &self,
        path: &Path,
        policy: &Policy,
        services: &Arc<Services>,
    ) -> Result<LoadedComponent, LoadError> {
        let bytes = std::fs::read(path).map_err(|cause| LoadError::Read {
            path: path.to_owned(),
            cause,
        })?;
        self.load_bytes(path, &bytes, policy, services).await
    }

    /// As [`Runtime::load`], for bytes already read; `path` names the component in errors. A
    /// library or a tool with dependencies is refused: those load through a host.
    pub async fn load_bytes(
        &self,
        path: &Path,
        bytes: &[u8],
        policy: &Policy,
        services: &Arc<Services>,
    ) -> Result<LoadedComponent, LoadError> {
        match self.load_any(path, bytes, policy, services, &[]).await? {
            Loaded::Tool(tool) => Ok(*tool),
            Loaded::Library(_) => Err(LoadError::Library {
                path: path.to_owned(),
            }),
        }
    }

    /// Load a tool or library component from `bytes`; a tool's dependencies resolve among
    /// `libraries` (capability-free ones are composed in, the others linked through the host).
    /// The steps, in order, are those of [`crate::load`].
    pub async fn load_any(
        &self,
        path: &Path,
        bytes: &[u8],
        policy: &Policy,
        services: &Arc<Services>,
        libraries: &[Arc<LoadedLibrary>],
    ) -> Result<Loaded, LoadError> {
        let steps = self.loader(policy, services);
        let hash = ContentHash::of(bytes);
        load::header(bytes).map_err(at(path))?;
        let signed = steps.signature(bytes, &hash).map_err(at(path))?;
        let grant = steps.grant(signed.manifest).map_err(at(path))?;
        let (component, cache) = steps
            .compile(bytes, &path.display().to_string())
            .map_err(at(path))?;
        let imports = steps
            .imports(&component, grant.manifest.as_deref())
            .map_err(at(path))?;
        if load::is_library(&grant) {
            let library = steps
                .library(path, bytes, &component, hash, signed.signer, grant)
                .map_err(at(path))?;
            return Ok(Loaded::Library(Arc::new(library)));
        }
        let composed = steps
            .composition(
                bytes,
                component,
                grant.manifest.as_deref(),
                &imports,
                libraries,
            )
            .map_err(at(path))?;
        let shape = steps.contract(&composed).map_err(at(path))?;
        let prepared = steps.pre_instantiate(&composed, shape).map_err(at(path))?;
        let (entry, tools) = steps
            .specs(prepared, &composed.component, &grant)
            .await
            .map_err(at(path))?;
        Ok(Loaded::Tool(Box::new(LoadedComponent {
            path: path.to_owned(),
            hash,
            cache,
            tools,
            grant_digest: grant.digest(),
            grant,
            signer: signed.signer,
            libraries: composed.libraries,
            entry,
        })))
    }

    /// The load steps, over this runtime's engine, linker and cache.
    fn loader<'a>(&'a self, policy: &'a Policy, services: &'a Arc<Services>) -> Loader<'a> {
        Loader {
            engine: &self.engine,
            linker: &self.linker,
            cache: &self.cache,
            policy,
            services,
        }
    }

    /// The tool specs of the component in `bytes`, for `chitin manifest embed` to record: a
    /// `chitin:tool` component's `specs()` run with no capability at all (no grant, no
    /// preopens, no network, no processes), or a typed-export component's specs derived from
    /// its type, described by `docs`. Nothing is verified: the bytes are an author's own build,
    /// not yet signed. A function only a library would provide traps if called.
    pub async fn unprivileged_specs(
        &self,
        path: &Path,
        bytes: &[u8],
        policy: &Policy,
        services: &Arc<Services>,
        docs: &Docs,
    ) -> Result<Vec<chitin_registry::manifest::ToolSpec>, LoadError> {
        let steps = self.loader(policy, services);
        let (component, _) = steps
            .compile(bytes, &path.display().to_string())
            .map_err(at(path))?;
        let libraries: Vec<String> = component
            .component_type()
            .imports(&self.engine)
            .map(|(name, _)| name.to_owned())
            .filter(|name| !name.starts_with("wasi:") && !name.starts_with("chitin:host/"))
            .collect();
        let shape =
            crate::contract::check(&self.engine, &component, &libraries).map_err(at(path))?;
        let bad_spec = |e: (String, String)| SpecsError::from(e).at(path);
        if shape == Shape::Typed {
            let funcs = typed_exports::discover(&self.engine, &component).map_err(at(path))?;
            let specs = typed_exports::specs(&funcs, docs).map_err(at(path))?;
            for spec in &specs {
                CheckedSpec::from_recorded(spec.clone()).map_err(bad_spec)?;
            }
            return Ok(specs);
        }
        let instantiate = |e: wasmtime::Error| InstantiateError::from(e).at(path);
        let mut linker = self.linker.clone();
        for (name, item) in component.component_type().imports(&self.engine) {
            let ComponentItem::ComponentInstance(instance) = item.ty else {
                continue;
            };
            if !libraries.iter().any(|l| l == name) {
                continue;
            }
            let mut stub = linker.instance(name).map_err(instantiate)?;
            for (function, item) in instance.exports(&self.engine) {
                if let ComponentItem::ComponentFunc(_) = item.ty {
                    stub.func_new_async(function, |_, _, _, _| {
                        Box::new(async {
                            Err(wasmtime::format_err!(
                                "specs() called a library, which describing tools may not do"
                            ))
                        })
                    })
                    .map_err(instantiate)?;
                }
            }
        }
        let pre = sandbox::pre_instantiate(&linker, &component)
            .and_then(ToolPre::new)
            .map_err(instantiate)?;
        // An author's build is described under the most any load may grant: a Python or
        // JavaScript runtime needs more memory than the default.
        let ceiling = policy.limits.default.at_ceiling(&policy.limits.ceiling);
        let specs = steps
            .specs_without_grant(&pre, &ceiling)
            .await
            .map_err(|reason| SpecsError::Instantiate(reason).at(path))?;
        for spec in &specs {
            // The same checks a load makes, so a spec the host would refuse is never signed.
            CheckedSpec::from_wit(spec.clone()).map_err(bad_spec)?;
        }
        Ok(specs.iter().map(crate::spec::recorded).collect())
    }

    /// Instantiate `component` and keep the instance alive without calling it: what one
    /// in-flight call holds (used to measure residency per live instance).
    pub async fn hold(
        &self,
        component: &LoadedComponent,
        services: &Arc<Services>,
    ) -> Result<sandbox::LiveInstance, ToolError> {
        let env = CallEnv {
            grant: &component.grant,
            services,
            ctx: &CallContext::default(),
            invoke: None,
            target: None,
        };
        let state = HostState::new(&env).map_err(|e| ToolError::HostFault(e.to_string()))?;
        sandbox::hold(
            &self.engine,
            component.entry.instance_pre(),
            state,
            &component.grant.limits,
        )
        .await
        .map_err(|e| ToolError::ExecutionFailed(format!("cannot instantiate: {e:#}")))
    }

    /// Call tool number `index` of `component` in a fresh sandbox, after validating the
    /// arguments against its schema, and cap its output. `invoke` is where the call sits in a
    /// chain of invocations, and where its own go.
    pub async fn call(
        &self,
        component: &LoadedComponent,
        index: usize,
        args: &CallArgs<'_>,
        services: &Arc<Services>,
        invoke: Position<'_>,
    ) -> CallReport {
        let ctx = invoke.ctx();
        let args_json = args.json();
        let limits = &component.grant.limits;
        let Some(tool) = component.tools.get(index) else {
            return CallReport::refused(ToolError::NotFound(format!(
                "{} has no tool number {index}",
                component.name()
            )));
        };
        // A typed export's arguments are checked as they are converted to its parameters, by
        // the same rules as its schema, with errors naming the field.
        let typed = match &component.entry {
            Entry::Tool(_) => {
                if let Err(e) = tool.validate_args(args) {
                    return CallReport::refused(e);
                }
                None
            }
            Entry::Typed(pre, funcs) => {
                let Some(func) = funcs.get(index) else {
                    return CallReport::refused(ToolError::NotFound(format!(
                        "{} has no tool number {index}",
                        component.name()
                    )));
                };
                match typed_exports::arguments(func, args_json) {
                    Ok(params) => Some((pre, func, params)),
                    Err(e) => return CallReport::refused(e),
                }
            }
        };
        let env = CallEnv {
            grant: &component.grant,
            services,
            ctx,
            invoke: Some(invoke),
            target: Some(CallTarget {
                tool: &tool.name,
                args_json,
            }),
        };
        let state = match HostState::new(&env) {
            Ok(state) => state,
            Err(e) => return CallReport::refused(ToolError::HostFault(e.to_string())),
        };
        let scanner = state.log.scanner.clone();
        let faults = state.faults.clone();
        let report = match (&component.entry, typed) {
            (_, Some((pre, func, params))) => {
                let results = func.ty.results().len();
                let report = sandbox::call_typed(
                    &self.engine,
                    pre,
                    state,
                    limits,
                    func.index(),
                    &params,
                    results,
                )
                .await;
                sandbox::RunReport {
                    result: report
                        .result
                        .and_then(|vals| typed_exports::result(func, &vals)),
                    log: report.log,
                    fuel_used: report.fuel_used,
                    duration: report.duration,
                    crashed: report.crashed,
                }
            }
            (Entry::Tool(pre), None) => {
                sandbox::call(&self.engine, pre, state, limits, &tool.own_name, args_json).await
            }
            (Entry::Typed(..), None) => {
                return CallReport::refused(ToolError::HostFault(
                    "a typed export was called without its arguments".into(),
                ));
            }
        };
        let mut log = report.log;
        for entry in &mut log.entries {
            entry.message = scanner.redact(&entry.message, "log entry");
        }
        // A host fault met by a capability decides the outcome, whatever the component did.
        let result = match faults.first() {
            Some(fault) => Err(ToolError::HostFault(fault)),
            None => report.result,
        };
        CallReport {
            result: guard(&scanner, result, limits.output_bytes),
            log,
            fuel_used: report.fuel_used,
            duration: report.duration,
            crashed: report.crashed,
        }
    }
}

/// What a call returns, result or error, cut to `max` bytes with a visible marker and with
/// secrets redacted before it reaches the agent; a result carrying a blocking pattern (a private
/// key) is withheld as a refusal. Only what can be kept is scanned (and a margin past the cut,
/// [`crate::leak::scan_window`]): the cost is bounded by the output cap, not by what the
/// component returned.
fn guard(
    scanner: &LeakScanner,
    result: Result<String, ToolError>,
    max: usize,
) -> Result<CallOutput, ToolError> {
    let withheld = |pattern: String| {
        ToolError::PermissionDenied(format!(
            "the result was withheld: it contains {pattern}, which chitin never hands to an agent"
        ))
    };
    match result {
        Ok(text) => {
            let total = text.len();
            let window = crate::leak::scan_window(&text, max);
            let kept = match scanner.scrub(window) {
                Scrubbed::Clean if window.len() == total => text,
                Scrubbed::Clean => window.to_owned(),
                Scrubbed::Redacted(redacted, _) => redacted,
                Scrubbed::Blocked(pattern) => return Err(withheld(pattern)),
            };
            Ok(cap_output(kept, max, total))
        }
        Err(e) => {
            let total = e.message().len();
            let window = crate::leak::scan_window(e.message(), max);
            let kept = match scanner.scrub(window) {
                Scrubbed::Clean => window.to_owned(),
                Scrubbed::Redacted(redacted, _) => redacted,
                Scrubbed::Blocked(pattern) => return Err(withheld(pattern)),
            };
            let message = cap_output(kept, max, total).text;
            Err(e.with_message(message))
        }
    }
}

/// Cut `text`, what is left of `total` bytes, to `max` bytes (on a character boundary) and
/// append a visible marker when anything was cut.
fn cap_output(text: String, max: usize, total: usize) -> CallOutput {
    if text.len() <= max && total <= max {
        return CallOutput {
            text,
            truncated_from: None,
        };
    }
    let total = total.max(text.len());
    let keep = text.floor_char_boundary(max);
    let mut cut = text;
    cut.truncate(keep);
    cut.push_str(&format!(
        "\n[chitin: output truncated: showing {keep} of {total} bytes]"
    ));
    CallOutput {
        text: cut,
        truncated_from: Some(total),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_from_results_and_errors_and_private_keys_withheld() {
        let value = "s3cr3t-VALUE-9f8e7d6c5b4a";
        let scanner = LeakScanner::new([("api_token", value)]).expect("scanner");
        let out = guard(
            &scanner,
            Ok(format!("{{\"echo\":\"Bearer {value}\"}}")),
            MAX,
        )
        .expect("redacted result");
        assert_eq!(out.text, "{\"echo\":\"Bearer [REDACTED:api_token]\"}");
        let e = guard(
            &scanner,
            Err(ToolError::ExternalService(format!("server said: {value}"))),
            MAX,
        )
        .expect_err("still an error");
        assert!(matches!(e, ToolError::ExternalService(_)), "{e:?}");
        assert!(!e.message().contains(value), "{e}");
        assert!(e.message().contains("[REDACTED:api_token]"), "{e}");
        let pem = format!(
            "-----BEGIN {}PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END {}PRIVATE KEY-----",
            "RSA ", "RSA "
        );
        let e = guard(&scanner, Ok(pem), MAX).expect_err("withheld");
        assert!(matches!(e, ToolError::PermissionDenied(_)), "{e:?}");
        // Ordinary text passes untouched.
        let text = "rotate the token; the password policy is in the runbook".to_owned();
        assert_eq!(
            guard(&scanner, Ok(text.clone()), MAX).expect("clean").text,
            text
        );
    }

    const MAX: usize = 64 * 1024;

    #[test]
    fn a_huge_result_or_error_is_scanned_only_as_far_as_it_is_kept_and_cut_with_a_marker() {
        let value = "s3cr3t-VALUE-9f8e7d6c5b4a";
        let scanner = LeakScanner::new([("api_token", value)]).expect("scanner");
        // The value crosses the cut; a private key lies far past it, where nothing is shown.
        let huge = format!(
            "{}{value}{}-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----",
            "x".repeat(MAX - 10),
            "y".repeat(8 << 20)
        );
        let total = huge.len();
        let out = guard(&scanner, Ok(huge.clone()), MAX).expect("cut, not withheld");
        assert_eq!(out.truncated_from, Some(total));
        assert!(
            !out.text.contains("s3cr3t"),
            "the value is redacted before the cut"
        );
        assert!(out.text.contains(&format!("of {total} bytes]")));
        let e = guard(&scanner, Err(ToolError::ExecutionFailed(huge)), MAX).expect_err("an error");
        assert!(e.message().len() < MAX + 100, "{}", e.message().len());
        assert!(!e.message().contains("s3cr3t"));
        assert!(e.message().ends_with(&format!("of {total} bytes]")));
    }

    #[test]
    fn output_under_the_cap_is_untouched() {
        let out = cap_output("{\"a\":1}".into(), 100, 7);
        assert_eq!(out.text, "{\"a\":1}");
        assert_eq!(out.truncated_from, None);
    }

    #[test]
    fn output_over_the_cap_is_cut_with_a_marker() {
        let out = cap_output("x".repeat(1000), 100, 1000);
        assert_eq!(out.truncated_from, Some(1000));
        assert!(out.text.starts_with(&"x".repeat(100)));
        assert!(
            out.text
                .contains("output truncated: showing 100 of 1000 bytes")
        );
    }
}
