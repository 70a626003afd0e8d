//! Trust at load: the tamper matrix (each refusal with its own error), policy cuts and clamps,
//! tool profiles, protected names, and remembered approvals.

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use chitin_host::approver::{ApprovalRequest, Approver, CallContext, Decision};
use chitin_host::data_dir::DataDir;
use chitin_host::policy::Policy;
use chitin_host::remembered_approvals::ApprovalStore;
use chitin_host::{Host, LoadError, Runtime, Services, ToolError};
use chitin_registry::artifact;
use chitin_registry::keys::SigningKey;
use chitin_registry::signature::{self, SignatureError};
use chitin_registry::trust_store::{Scope, TrustStore, TrustedKey};
use common::{component, repo, test_engine};
use serde_json::json;

const ECHO_MANIFEST: &str = r#"schema = 1
[component]
name = "echo"
namespace = "chitin"
version = "0.1.0"
publisher = "chitin"
"#;

/// A publisher key and a trust store trusting it for `scope`.
fn trusted(scope: &str) -> (SigningKey, TrustStore) {
    let key = SigningKey::generate();
    let mut store = TrustStore::empty();
    store
        .add(
            TrustedKey::new(
                key.public().clone(),
                "tester",
                vec![Scope::parse(scope).expect("scope")],
            )
            .expect("entry"),
        )
        .expect("add");
    (key, store)
}

/// The built echo component with `manifest` embedded instead of its own, signed by `key`.
fn echo_with(manifest: &str, key: &SigningKey) -> Vec<u8> {
    let built = std::fs::read(component("echo")).expect("echo");
    let bare = signature::strip(&built).expect("strip");
    let manifest = &common::with_recorded_specs(&built, manifest);
    let embedded = artifact::embed_manifest(&bare, manifest).expect("embed");
    signature::sign(&embedded, key).expect("sign")
}

struct Env {
    data: tempfile::TempDir,
    services: Arc<Services>,
    runtime: Runtime,
}

fn env(trust: TrustStore) -> Env {
    let data = tempfile::tempdir().expect("tempdir");
    let workspace = data.path().join("workspace");
    std::fs::create_dir_all(&workspace).expect("workspace");
    let dir = DataDir::resolve(Some(data.path())).expect("data dir");
    let services = Arc::new(
        Services::new(&workspace, dir)
            .expect("services")
            .with_trust(trust),
    );
    let runtime = Runtime::new(common::shared_cache(), &test_engine()).expect("runtime");
    Env {
        data,
        services,
        runtime,
    }
}

async fn load(env: &Env, bytes: &[u8], policy: &Policy) -> Result<(), LoadError> {
    env.runtime
        .load_bytes(Path::new("under-test.wasm"), bytes, policy, &env.services)
        .await
        .map(|_| ())
}

fn builtin() -> Policy {
    Policy::builtin().expect("policy")
}

fn signature_error(result: Result<(), LoadError>) -> SignatureError {
    match result {
        Err(LoadError::Signature { cause, .. }) => cause,
        Err(other) => panic!("expected a signature refusal, got {other}"),
        Ok(()) => panic!("loaded"),
    }
}

#[tokio::test]
async fn a_properly_signed_component_loads() {
    let (key, trust) = trusted("chitin/*");
    let env = env(trust);
    load(&env, &echo_with(ECHO_MANIFEST, &key), &builtin())
        .await
        .expect("loads");
}

#[tokio::test]
async fn a_flipped_code_byte_is_tampered_code() {
    let (key, trust) = trusted("chitin/*");
    let env = env(trust);
    let mut bytes = echo_with(ECHO_MANIFEST, &key);
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    let err = signature_error(load(&env, &bytes, &builtin()).await);
    assert!(matches!(err, SignatureError::TamperedCode { .. }), "{err}");
}

#[tokio::test]
async fn an_edited_manifest_is_tampered_manifest() {
    let (key, trust) = trusted("chitin/*");
    let env = env(trust);
    let mut bytes = echo_with(ECHO_MANIFEST, &key);
    let at = bytes
        .windows(7)
        .position(|w| w == b"0.1.0\"\n")
        .expect("version in manifest");
    bytes[at] = b'9';
    let err = signature_error(load(&env, &bytes, &builtin()).await);
    assert!(
        matches!(err, SignatureError::TamperedManifest { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn a_stripped_signature_is_unsigned() {
    let (key, trust) = trusted("chitin/*");
    let env = env(trust);
    let bytes = signature::strip(&echo_with(ECHO_MANIFEST, &key)).expect("strip");
    let err = signature_error(load(&env, &bytes, &builtin()).await);
    assert!(matches!(err, SignatureError::Unsigned), "{err}");
}

#[tokio::test]
async fn an_unknown_key_is_refused_naming_it() {
    let (_, trust) = trusted("chitin/*");
    let env = env(trust);
    let stranger = SigningKey::generate();
    let err = signature_error(load(&env, &echo_with(ECHO_MANIFEST, &stranger), &builtin()).await);
    assert!(matches!(err, SignatureError::UnknownSigner { .. }), "{err}");
    assert!(
        err.to_string()
            .contains(&stranger.public().key_id().to_string()),
        "{err}"
    );
}

#[tokio::test]
async fn a_key_outside_its_scope_is_refused() {
    let (key, trust) = trusted("acme/*");
    let env = env(trust);
    let err = signature_error(load(&env, &echo_with(ECHO_MANIFEST, &key), &builtin()).await);
    assert!(matches!(err, SignatureError::OutOfScope { .. }), "{err}");
    assert!(err.to_string().contains("chitin/echo"), "{err}");
}

#[tokio::test]
async fn a_manifest_with_an_unknown_key_is_refused_naming_it() {
    let (key, trust) = trusted("chitin/*");
    let env = env(trust);
    let manifest = format!("{ECHO_MANIFEST}[capabilities.filez]\npaths = []\n");
    match load(&env, &echo_with(&manifest, &key), &builtin()).await {
        Err(LoadError::Manifest { cause, .. }) => {
            assert!(cause.to_string().contains("filez"), "{cause}")
        }
        Err(other) => panic!("expected a manifest refusal, got {other}"),
        Ok(()) => panic!("loaded"),
    }
}

#[tokio::test]
async fn an_import_not_covered_by_the_manifest_is_refused_naming_it() {
    let (key, trust) = trusted("*");
    let env = env(trust);
    let wat = r#"(component
        (import "chitin:host/process@0.1.0" (instance))
        (import "wasi:sockets/tcp@0.3.0" (instance)))"#;
    let raw = wat::parse_str(wat).expect("wat");
    let bytes = signature::sign(
        &artifact::embed_manifest(&raw, ECHO_MANIFEST).expect("embed"),
        &key,
    )
    .expect("sign");
    match load(&env, &bytes, &builtin()).await {
        Err(LoadError::UncoveredImports { imports, .. }) => {
            assert!(
                imports.contains("chitin:host/process@0.1.0 (needs a [capabilities.process]"),
                "{imports}"
            );
            assert!(
                imports.contains("wasi:sockets/tcp@0.3.0 (only WASI 0.2.x is linked)"),
                "{imports}"
            );
        }
        Err(other) => panic!("expected uncovered imports, got {other}"),
        Ok(()) => panic!("loaded"),
    }
}

#[tokio::test]
async fn a_third_party_tool_named_like_a_built_in_is_namespaced_beside_it() {
    let (key, trust) = trusted("acme/*");
    let env = env(trust);
    let manifest = ECHO_MANIFEST
        .replace("name = \"echo\"", "name = \"totally-echo\"")
        .replace("namespace = \"chitin\"", "namespace = \"acme\"")
        .replace("publisher = \"chitin\"", "publisher = \"acme\"");
    let path = env.data.path().join("acme-echo.wasm");
    std::fs::write(&path, echo_with(&manifest, &key)).expect("write");
    let mut host = Host::new(
        Runtime::new(common::shared_cache(), &test_engine()).expect("runtime"),
        builtin(),
        env.services.clone(),
    );
    host.load_file(&path)
        .await
        .expect("a namespaced tool loads");
    let names: Vec<&str> = host.tools().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["acme__echo"], "the bare built-in name stays free");
    let out = host
        .call("acme__echo", r#"{"message":"namespaced"}"#)
        .await
        .result
        .expect("call by the namespaced name");
    assert!(out.text.contains("namespaced"), "{}", out.text);
    assert!(
        host.call("echo", r#"{"message":"x"}"#)
            .await
            .result
            .is_err()
    );
}

#[tokio::test]
async fn a_denied_capability_is_cut_and_limits_are_clamped() {
    let (key, trust) = trusted("chitin/*");
    let env = env(trust);
    let manifest = format!(
        "{ECHO_MANIFEST}[capabilities.env]\nkeys = [\"HOME\"]\n[limits]\nmemory_bytes = 1073741824\ntimeout_ms = 1000\n"
    );
    let mut policy = builtin();
    policy.capabilities.allow.retain(|c| c != "env");
    let loaded = env
        .runtime
        .load_bytes(
            Path::new("echo.wasm"),
            &echo_with(&manifest, &key),
            &policy,
            &env.services,
        )
        .await
        .expect("loads");
    let grant = &loaded.grant;
    assert!(
        grant.cuts.iter().any(|c| c.what == "capabilities.env"),
        "{:?}",
        grant.cuts
    );
    assert_eq!(
        grant.limits.memory_bytes,
        policy.limits.ceiling.memory_bytes
    );
    assert_eq!(grant.limits.timeout_ms, 1000);
    assert!(
        grant.cuts.iter().any(|c| c.what == "limits.memory_bytes"),
        "{:?}",
        grant.cuts
    );
}

async fn host_with(policy: Policy) -> (tempfile::TempDir, Host) {
    let data = tempfile::tempdir().expect("tempdir");
    let runtime = Runtime::new(common::shared_cache(), &test_engine()).expect("runtime");
    let mut host = Host::new(runtime, policy, common::services(data.path(), data.path()));
    for name in ["echo", "time", "json"] {
        host.load_file(&component(name)).await.expect("load");
    }
    (data, host)
}

#[tokio::test]
async fn profiles_select_the_tools_offered() {
    let minimal = Policy::load(&repo().join("policies/minimal.toml")).expect("minimal");
    let (_d, host) = host_with(minimal).await;
    let names: Vec<_> = host.tools().map(|t| t.name.clone()).collect();
    assert_eq!(names, ["echo", "json", "time"]);

    let mut narrow = builtin();
    narrow.tools.allow = vec!["echo".into()];
    narrow.tools.deny = vec!["time".into()];
    let (_d, host) = host_with(narrow).await;
    let names: Vec<_> = host.tools().map(|t| t.name.clone()).collect();
    assert_eq!(names, ["echo"]);
    let report = host.call("time", r#"{"operation":"now"}"#).await;
    assert!(
        matches!(report.result, Err(ToolError::NotFound(_))),
        "{:?}",
        report.result
    );
}

/// Approves every request, with "always allow", and counts them.
struct Counting(AtomicUsize);

#[async_trait::async_trait]
impl Approver for Counting {
    async fn approve(&self, _: &ApprovalRequest) -> Decision {
        self.0.fetch_add(1, Ordering::SeqCst);
        Decision::ApprovedAlways
    }
}

#[tokio::test]
async fn always_allow_is_remembered_until_revoked_and_always_rules_ask_every_time() {
    let mut policy = builtin();
    let ask: chitin_host::policy::ApprovalRule =
        toml::from_str("tool = \"echo\"\nmode = \"ask\"").expect("rule");
    let always: chitin_host::policy::ApprovalRule = toml::from_str(
        "tool = \"echo\"\narg = \"message\"\nmatches = [\"rm *\"]\nmode = \"always\"",
    )
    .expect("rule");
    policy.approval = vec![always, ask];
    let (_d, host) = host_with(policy).await;
    let approver = Arc::new(Counting(AtomicUsize::new(0)));
    let ctx = CallContext {
        approver: approver.clone(),
        user: "tester".into(),
        ..CallContext::default()
    };
    let asked = || approver.0.load(Ordering::SeqCst);
    let call = |message: &str| {
        let args = json!({ "message": message }).to_string();
        let host = &host;
        let ctx = &ctx;
        async move { host.call_in("echo", &args, ctx).await.result.expect("echo") }
    };
    call("hello").await;
    assert_eq!(asked(), 1);
    call("hello again").await;
    assert_eq!(asked(), 1, "an always-allow is remembered");
    call("rm -rf /").await;
    call("rm -rf /").await;
    assert_eq!(asked(), 3, "an `always` rule asks every time");

    let store = ApprovalStore::new(host.services().state().clone());
    let remembered = store.list().expect("list");
    assert_eq!(remembered.len(), 1);
    assert_eq!(remembered[0].component, "chitin/echo");
    assert_eq!(remembered[0].user, "tester");
    store.revoke("echo").expect("revoke");
    call("hello").await;
    assert_eq!(asked(), 4, "asked again after revoking");
}

#[tokio::test]
async fn a_call_needing_approval_with_nobody_to_ask_is_denied() {
    let mut policy = builtin();
    policy.approval = vec![toml::from_str("tool = \"echo\"\nmode = \"ask\"").expect("rule")];
    let (_d, host) = host_with(policy).await;
    let report = host.call("echo", r#"{"message":"x"}"#).await;
    assert!(
        matches!(&report.result, Err(ToolError::PermissionDenied(m)) if m.contains("approval")),
        "{:?}",
        report.result
    );
}

/// Write `bytes` as `dir/echo.wasm` and load it into a fresh host over `env`'s services.
async fn load_in(env: &Env, dir: &Path, bytes: Vec<u8>) -> Result<(), LoadError> {
    std::fs::create_dir_all(dir).expect("dir");
    let path = dir.join("echo.wasm");
    std::fs::write(&path, bytes).expect("write");
    let runtime = Runtime::new(common::shared_cache(), &test_engine()).expect("runtime");
    let mut host = Host::new(runtime, builtin(), env.services.clone());
    host.load_file(&path).await
}

#[tokio::test]
async fn pins_refuse_a_replayed_older_version_and_a_widened_upgrade_from_any_source() {
    let (key, trust) = trusted("chitin/*");
    let env = env(trust);
    let installed = env.services.data_dir().components();
    let elsewhere = env.data.path().join("build-components");
    let version = |v: &str, extra: &str| {
        echo_with(
            &format!("{}{extra}", ECHO_MANIFEST.replace("0.1.0", v)),
            &key,
        )
    };
    load_in(&env, &installed, version("0.2.0", ""))
        .await
        .expect("first load pins");
    match load_in(&env, &elsewhere, version("0.1.0", "")).await {
        Err(LoadError::Pin { cause, .. }) => {
            assert!(cause.to_string().contains("downgrade"), "{cause}")
        }
        other => panic!("expected a downgrade refusal, got {:?}", other.err()),
    }
    let wider = version("0.3.0", "[capabilities.env]\nkeys = [\"HOME\"]\n");
    match load_in(&env, &installed, wider).await {
        Err(LoadError::Pin { cause, .. }) => {
            assert!(cause.to_string().contains("capabilities.env"), "{cause}")
        }
        other => panic!("expected a widening refusal, got {:?}", other.err()),
    }
    load_in(&env, &elsewhere, version("0.3.0", ""))
        .await
        .expect("a plain upgrade is accepted");
}

#[tokio::test]
async fn a_corrupted_pin_record_refuses_the_load_naming_the_fix() {
    let (key, trust) = trusted("chitin/*");
    let env = env(trust);
    env.services
        .state()
        .record_put(
            chitin_host::state_db::Records::Pins,
            "chitin/echo",
            b"{\"component\": \"chitin/echo\", \"version\"",
        )
        .expect("write");
    let dir = env.data.path().join("components-dir");
    match load_in(&env, &dir, echo_with(ECHO_MANIFEST, &key)).await {
        Err(LoadError::Pin { cause, .. }) => {
            let text = cause.to_string();
            assert!(
                text.contains("the pin of chitin/echo cannot be read"),
                "{text}"
            );
            assert!(
                text.contains("`chitin approvals revoke chitin/echo`"),
                "{text}"
            );
        }
        other => panic!("expected a corrupt-pin refusal, got {:?}", other.err()),
    }
    assert!(
        chitin_host::pins::PinStore::new(env.services.state().clone())
            .forget("chitin/echo")
            .expect("forget")
    );
    load_in(&env, &dir, echo_with(ECHO_MANIFEST, &key))
        .await
        .expect("loads once the pin is forgotten");
}

#[tokio::test]
async fn a_remembered_verification_does_not_outlive_a_trust_store_change() {
    let (key, trust) = trusted("chitin/*");
    let env = env(trust);
    let bytes = echo_with(ECHO_MANIFEST, &key);
    load(&env, &bytes, &builtin()).await.expect("verified");
    load(&env, &bytes, &builtin()).await.expect("remembered");
    let untrusting = Arc::new(
        Services::new(
            env.services.workspace(),
            DataDir::resolve(Some(env.data.path())).expect("data dir"),
        )
        .expect("services"),
    );
    let err = env
        .runtime
        .load_bytes(Path::new("echo.wasm"), &bytes, &builtin(), &untrusting)
        .await
        .map(|_| ())
        .expect_err("the key is no longer trusted");
    assert!(
        matches!(
            err,
            LoadError::Signature {
                cause: SignatureError::UnknownSigner { .. },
                ..
            }
        ),
        "{err}"
    );
}
