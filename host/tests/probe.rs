//! The test-only `probe` capability (built with `--features test-capability`) proves that a
//! capability is its WIT, one module and one table line: the manifest section parses, import
//! coverage, widening, the audit, the policy cut, the grant and linking all pick it up with nothing else
//! edited.

use std::sync::Arc;

use chitin_host::CallContext;
use chitin_host::data_dir::DataDir;
use chitin_host::grant::Grant;
use chitin_host::policy::Policy;
use chitin_host::state::{CallEnv, HostState};
use chitin_host::{Services, caps};
use chitin_registry::audit::capability_lines;
use chitin_registry::imports::{Coverage, coverage};
use chitin_registry::manifest::Manifest;
use chitin_registry::widening::widenings;
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, Store};

const IMPORT: &str = "chitin:probe/probe@0.1.0";

fn manifest(section: &str) -> Manifest {
    Manifest::parse(&format!(
        "schema = 1\n[component]\nname = \"probe\"\nnamespace = \"test\"\nversion = \"0.1.0\"\n\
         publisher = \"test\"\n{section}"
    ))
    .expect("manifest")
}

/// The built-in policy, with the probe allowed when `allow`.
fn policy(allow: bool) -> Policy {
    let mut policy = Policy::builtin().expect("built-in policy");
    if allow {
        policy.capabilities.allow.push("probe".into());
    }
    policy
}

/// A component that imports `chitin:probe/probe` and exports `run`, returning the level.
const COMPONENT: &str = r#"
(component
  (import "chitin:probe/probe@0.1.0" (instance $probe
    (export "level" (func (result u32)))))
  (core func $level (canon lower (func $probe "level")))
  (core module $m
    (import "probe" "level" (func $level (result i32)))
    (func (export "run") (result i32) (call $level)))
  (core instance $i (instantiate $m
    (with "probe" (instance (export "level" (func $level))))))
  (func (export "run") (result u32) (canon lift (core func $i "run"))))
"#;

/// Run the component under `grant`; the level it reads.
async fn run(grant: &Grant, services: &Arc<Services>) -> u32 {
    let mut config = Config::new();
    config.wasm_component_model(true);
    let engine = Engine::new(&config).expect("engine");
    let mut linker = Linker::<HostState>::new(&engine);
    caps::add_to_linker(&mut linker).expect("link");
    let component = Component::new(&engine, wat::parse_str(COMPONENT).expect("wat")).expect("c");
    let ctx = CallContext::default();
    let env = CallEnv {
        grant,
        services,
        ctx: &ctx,
        invoke: None,
        target: None,
    };
    let mut store = Store::new(&engine, HostState::new(&env).expect("state"));
    let instance = linker
        .instantiate_async(&mut store, &component)
        .await
        .expect("the table links the probe");
    let run = instance
        .get_typed_func::<(), (u32,)>(&mut store, "run")
        .expect("run");
    run.call_async(&mut store, ()).await.expect("call").0
}

#[tokio::test]
async fn the_probe_is_parsed_covered_widened_cut_granted_and_linked_from_one_table_line() {
    let asked = manifest("[capabilities.probe]\nlevel = 3\n");
    let none = manifest("");

    // The section parses strictly, and its import is covered only when it is declared.
    assert!(Manifest::parse(&asked.to_toml().replace("level = 3", "level = 0")).is_err());
    assert_eq!(
        coverage(IMPORT, Some(&asked)),
        Coverage::Capability("probe")
    );
    assert_eq!(coverage(IMPORT, Some(&none)), Coverage::Undeclared("probe"));

    // Widening: adding it, and raising its level, are reported; lowering it is not.
    let w = widenings(&none, &asked);
    assert!(
        w.iter().any(|x| x.contains("capabilities.probe: added")),
        "{w:?}"
    );
    let higher = manifest("[capabilities.probe]\nlevel = 5\n");
    let w = widenings(&asked, &higher);
    assert_eq!(w, ["capabilities.probe.level: raised from 3 to 5"]);
    assert!(widenings(&higher, &asked).is_empty());

    // The audit (and so the lockfile's approved grant) shows it in plain words.
    let lines = capability_lines(&asked.capabilities);
    assert!(
        lines
            .iter()
            .any(|l| l.name == "probe" && l.scope == "level 3"),
        "{lines:?}"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let workspace = dir.path().join("workspace");
    std::fs::create_dir(&workspace).expect("workspace");
    let data = DataDir::resolve(Some(&dir.path().join("data"))).expect("data dir");
    let services = Arc::new(Services::new(&workspace, data).expect("services"));

    // The shipped policy never allows it: the section is cut, with the reason, and the
    // component reads 0 through the linked interface.
    let cut = Grant::resolve(Some(asked.clone()), &policy(false), &services).expect("grant");
    assert_eq!(cut.cuts[0].what, "capabilities.probe");
    assert!(cut.cuts[0].reason.contains("capabilities.allow"));
    assert_eq!(cut.capabilities.probe, 0);
    assert_eq!(run(&cut, &services).await, 0);

    // A policy that allows it grants the level, and the component reads it.
    let granted = Grant::resolve(Some(asked), &policy(true), &services).expect("grant");
    assert!(granted.cuts.is_empty(), "{:?}", granted.cuts);
    assert_eq!(granted.capabilities.probe, 3);
    assert_eq!(run(&granted, &services).await, 3);
    assert!(caps::is_linked(IMPORT));
}

#[test]
fn the_shipped_policies_never_allow_the_probe() {
    for entry in
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../policies")).expect("policies")
    {
        let path = entry.expect("entry").path();
        let policy = Policy::load(&path).expect("policy");
        assert!(
            !policy.allows_capability("probe"),
            "{} allows the test-only probe",
            path.display()
        );
    }
}
