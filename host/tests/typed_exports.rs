//! Components of plain typed WIT exports: one tool per function, schemas derived from the WIT
//! types (golden JSON per type kind, in `tests/golden/typed/`), arguments converted with errors
//! naming the field, a `result` error as execution-failed, and resources refused by name.

use crate::common;

use std::sync::OnceLock;

use chitin_host::typed_exports::{self, Docs};
use chitin_host::{Limits, LoadError, Runtime, ToolError};
use chitin_registry::manifest::ToolSpec;
use common::{TestEnv, fixture, policy, repo, resign, services, test_engine};
use serde_json::{Value, json};

/// The specs derived from the `test-typed` fixture, described by its WIT.
fn derived() -> &'static [ToolSpec] {
    static SPECS: OnceLock<Vec<ToolSpec>> = OnceLock::new();
    SPECS.get_or_init(|| {
        let engine = wasmtime::Engine::default();
        let bytes = std::fs::read(fixture("test-typed")).expect("read the fixture");
        let component =
            wasmtime::component::Component::from_binary(&engine, &bytes).expect("compile");
        let funcs = typed_exports::discover(&engine, &component).expect("discover");
        let docs = Docs::from_wit(&repo().join("components/test-typed/wit")).expect("WIT");
        typed_exports::specs(&funcs, &docs).expect("specs")
    })
}

/// Compare tool `tool`'s derived spec with `tests/golden/typed/TOOL.json`; `CHITIN_BLESS=1`
/// rewrites the golden file instead.
fn golden(tool: &str) {
    let spec = derived()
        .iter()
        .find(|s| s.name == tool)
        .unwrap_or_else(|| panic!("no tool {tool}"));
    let parse = |text: &str| serde_json::from_str::<Value>(text).expect("schema is JSON");
    let actual = serde_json::to_string_pretty(&json!({
        "name": spec.name,
        "description": spec.description,
        "input_schema": parse(&spec.input_schema),
        "output_schema": spec.output_schema.as_deref().map(parse),
    }))
    .expect("json")
        + "\n";
    let path = repo()
        .join("tests/golden/typed")
        .join(format!("{tool}.json"));
    if std::env::var_os("CHITIN_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("dir")).expect("golden dir");
        std::fs::write(&path, &actual).expect("bless");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (CHITIN_BLESS=1 writes it)", path.display()));
    assert_eq!(actual, expected, "{tool} differs from {}", path.display());
}

macro_rules! golden_tests {
    ($($test:ident => $tool:literal,)*) => {$(
        #[test]
        fn $test() {
            golden($tool);
        }
    )*};
}

golden_tests! {
    schema_of_bool => "kinds_echo_bool",
    schema_of_integers_carries_their_ranges => "kinds_echo_integers",
    schema_of_floats => "kinds_echo_floats",
    schema_of_char => "kinds_echo_char",
    schema_of_string => "kinds_echo_string",
    schema_of_option_is_a_property_that_is_not_required => "kinds_echo_option",
    schema_of_record_is_a_closed_object => "kinds_echo_record",
    schema_of_variant_is_one_of_tagged_objects => "kinds_echo_variant",
    schema_of_enum_is_a_string_enum => "kinds_echo_enum",
    schema_of_flags_is_an_array_of_unique_names => "kinds_echo_flags",
    schema_of_tuple_is_a_fixed_length_array => "kinds_echo_tuple",
    schema_of_list => "kinds_echo_list",
    schema_of_list_of_u8_is_base64 => "kinds_echo_bytes",
    schema_of_result_is_its_ok_value => "kinds_echo_result",
    schema_of_a_function_returning_nothing => "nothing",
}

#[test]
fn tools_are_named_from_the_functions_and_prefixed_by_their_interface() {
    let names: Vec<&str> = derived().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names[0], "nothing");
    assert!(names.contains(&"kinds_echo_bool"), "{names:?}");
    assert_eq!(names.len(), 15, "{names:?}");
}

/// The fixture, loaded and signed as built.
async fn env() -> TestEnv {
    TestEnv::with(&[fixture("test-typed")]).await
}

#[tokio::test]
async fn every_kind_of_value_goes_in_and_comes_back_as_json() {
    let env = env().await;
    let cases = [
        ("kinds_echo_bool", json!({"v": true}), json!(true)),
        (
            "kinds_echo_integers",
            json!({"a": -128, "b": 255, "c": -32768, "d": 65535, "e": -2147483648i64,
                   "f": 4294967295u64, "g": i64::MIN, "h": u64::MAX}),
            json!([
                -128,
                255,
                -32768,
                65535,
                -2147483648i64,
                4294967295u64,
                i64::MIN,
                u64::MAX
            ]),
        ),
        (
            "kinds_echo_floats",
            json!({"a": 1.5, "b": -0.25}),
            json!([1.5, -0.25]),
        ),
        ("kinds_echo_char", json!({"v": "é"}), json!("é")),
        ("kinds_echo_string", json!({"v": "hi"}), json!("hi")),
        ("kinds_echo_option", json!({"w": []}), json!(null)),
        (
            "kinds_echo_option",
            json!({"v": 7, "w": ["a", null]}),
            json!(7),
        ),
        (
            "kinds_echo_record",
            json!({"p": {"x": 1, "y": -2}}),
            json!({"x": 1, "y": -2, "label": null}),
        ),
        (
            "kinds_echo_variant",
            json!({"v": {"tag": "square", "value": 3}}),
            json!({"tag": "square", "value": 3}),
        ),
        (
            "kinds_echo_variant",
            json!({"v": {"tag": "empty"}}),
            json!({"tag": "empty"}),
        ),
        ("kinds_echo_enum", json!({"v": "green"}), json!("green")),
        (
            "kinds_echo_flags",
            json!({"v": ["write", "read"]}),
            json!(["read", "write"]),
        ),
        (
            "kinds_echo_tuple",
            json!({"v": ["a", 2, false]}),
            json!(["a", 2, false]),
        ),
        (
            "kinds_echo_list",
            json!({"v": [{"x": 1, "y": 2, "label": "p"}]}),
            json!([{"x": 1, "y": 2, "label": "p"}]),
        ),
        (
            "kinds_echo_bytes",
            json!({"v": "AAEC/w=="}),
            json!("AAEC/w=="),
        ),
        ("kinds_echo_result", json!({"text": "fine"}), json!("fine")),
    ];
    for (tool, args, want) in cases {
        let out = env.ok(tool, args.clone()).await;
        assert_eq!(out, json!({"result": want}), "{tool} {args}");
    }
    assert_eq!(env.ok("nothing", json!({})).await, json!({}));
}

#[tokio::test]
async fn arguments_that_do_not_fit_are_refused_naming_the_field() {
    let env = env().await;
    let cases = [
        (
            "kinds_echo_record",
            json!({"p": {"x": 3.5, "y": 0}}),
            "p.x: expected an integer in -2147483648..=2147483647, got 3.5",
        ),
        (
            "kinds_echo_record",
            json!({"p": {"x": 1}}),
            "p.y: missing (it is required)",
        ),
        (
            "kinds_echo_record",
            json!({"p": {"x": 1, "y": 2, "z": 3}}),
            "p.z: unknown field (expected x, y, label)",
        ),
        (
            "kinds_echo_list",
            json!({"v": [{"x": 1, "y": 2}, {"x": "1", "y": 2}]}),
            "v[1].x: expected an integer in -2147483648..=2147483647, got the string \"1\"",
        ),
        (
            "kinds_echo_integers",
            json!({"a": 0, "b": 256, "c": 0, "d": 0, "e": 0, "f": 0, "g": 0, "h": 0}),
            "b: expected an integer in 0..=255, got 256",
        ),
        (
            "kinds_echo_char",
            json!({"v": "ab"}),
            "v: expected a one-character string",
        ),
        (
            "kinds_echo_enum",
            json!({"v": "mauve"}),
            "v: expected one of red, green, blue",
        ),
        (
            "kinds_echo_flags",
            json!({"v": ["read", "read"]}),
            "v[1]: flag `read` appears twice",
        ),
        (
            "kinds_echo_tuple",
            json!({"v": ["a", 2]}),
            "v: expected an array of 3 items",
        ),
        (
            "kinds_echo_bytes",
            json!({"v": "not base64!"}),
            "v: expected base64 text",
        ),
        (
            "kinds_echo_variant",
            json!({"v": {"tag": "square"}}),
            "v.value: missing (case `square` carries a value)",
        ),
        (
            "kinds_echo_variant",
            json!({"v": {"tag": "hexagon"}}),
            "v.tag: expected {\"tag\": one of circle, square, empty",
        ),
        (
            "kinds_echo_bool",
            json!({"v": true, "w": 1}),
            "w: unknown argument (expected v)",
        ),
        ("kinds_echo_bool", json!({}), "v: missing (it is required)"),
    ];
    for (tool, args, want) in cases {
        let report = env.call(tool, args.clone()).await;
        match report.result {
            Err(ToolError::InvalidArgs(message)) => {
                assert!(message.starts_with(want), "{tool} {args}: {message}");
            }
            other => panic!("{tool} {args}: expected invalid-args, got {other:?}"),
        }
        assert_eq!(report.fuel_used, 0, "{tool}: refused before anything ran");
    }
}

#[tokio::test]
async fn a_result_error_is_execution_failed_carrying_the_error_value() {
    let env = env().await;
    let report = env
        .call("kinds_echo_result", json!({"text": "boom", "fail": 7}))
        .await;
    match report.result {
        Err(ToolError::ExecutionFailed(message)) => {
            let (_, value) = message
                .split_once(": ")
                .expect("the error value after `: `");
            let value: Value = serde_json::from_str(value).expect("the error value is JSON");
            assert_eq!(value, json!({"x": 7, "y": 0, "label": "boom"}), "{message}");
            assert!(
                message.contains("fixture:typed/kinds@0.1.0#echo-result` returned an error"),
                "{message}"
            );
        }
        other => panic!("expected execution-failed, got {other:?}"),
    }
}

/// Load `bytes`, signed with the test key under a manifest that asks for nothing, into a fresh
/// host.
async fn load(bytes: &[u8]) -> Result<(), LoadError> {
    let manifest = "schema = 1\n[component]\nname = \"typed\"\nnamespace = \"test\"\n\
                    version = \"0.1.0\"\npublisher = \"tests\"\ndescription = \"d\"\n";
    load_signed(&resign(bytes, manifest)).await
}

/// Load `signed` (a signed component) into a fresh host.
async fn load_signed(signed: &[u8]) -> Result<(), LoadError> {
    let data = tempfile::tempdir().expect("tempdir");
    let workspace = tempfile::tempdir().expect("tempdir");
    let path = data.path().join("under-test.wasm");
    std::fs::write(&path, signed).expect("write");
    let runtime = Runtime::new(common::shared_cache(), &test_engine()).expect("runtime");
    let mut host = chitin_host::Host::new(
        runtime,
        policy(Limits::default()),
        services(data.path(), workspace.path()),
    );
    host.load_path(&path).await
}

#[tokio::test]
async fn a_function_taking_or_returning_a_resource_is_refused_by_name() {
    let wasm = wat::parse_str(
        r#"(component
            (type $r (resource (rep i32)))
            (export $counter "counter" (type $r))
            (core module $m (func (export "make") (result i32) i32.const 0))
            (core instance $i (instantiate $m))
            (func $make (result (own $counter)) (canon lift (core func $i "make")))
            (export "make-counter" (func $make))
        )"#,
    )
    .expect("wat");
    let err = load(&wasm).await.expect_err("refused");
    let message = err.to_string();
    assert!(matches!(err, LoadError::TypedExport { .. }), "{message}");
    assert!(
        message.contains("exported function `make-counter` takes or returns a resource handle"),
        "{message}"
    );
}

#[tokio::test]
async fn an_async_export_is_refused() {
    let wasm = wat::parse_str(
        r#"(component
            (core module $m (func (export "f") (result i32) i32.const 0))
            (core instance $i (instantiate $m))
            (func $f async (canon lift (core func $i "f") async))
            (export "tick" (func $f))
        )"#,
    )
    .expect("wat");
    // The engine runs no async component: it refuses to compile one, before chitin's own check
    // (which names the function) is reached.
    let err = load(&wasm).await.expect_err("refused");
    let message = err.to_string();
    assert!(matches!(err, LoadError::Compile { .. }), "{message}");
    assert!(
        message.contains("async component functions require the component model async feature"),
        "{message}"
    );
}

#[tokio::test]
async fn a_component_exporting_chitin_tool_and_plain_functions_is_served_by_chitin_tool() {
    let env = TestEnv::with(&[fixture("test-mixed")]).await;
    let tools: Vec<&str> = env.host.components()[0]
        .tools
        .iter()
        .map(|t| t.spec.name.as_str())
        .collect();
    assert_eq!(tools, ["mixed_echo"]);
    assert_eq!(env.ok("mixed_echo", json!({"a": 1})).await, json!({"a": 1}));
    let report = env.call("extra", json!({})).await;
    assert!(
        matches!(report.result, Err(ToolError::NotFound(_))),
        "{report:?}"
    );
}

#[tokio::test]
async fn a_signed_schema_that_differs_from_the_derived_one_is_refused_naming_the_tool() {
    let bytes = std::fs::read(fixture("test-typed")).expect("read the fixture");
    let manifest = chitin_registry::artifact::manifest_text(&bytes)
        .expect("artifact")
        .expect("a manifest")
        .to_owned();
    let signed_schema = r#"{"additionalProperties":false,"properties":{"v":{"type":"boolean"}},"required":["v"],"type":"object"}"#;
    assert!(manifest.contains(signed_schema), "{manifest}");
    let widened = manifest.replace(signed_schema, r#"{"type":"object"}"#);
    let err = load_signed(&resign(&bytes, &widened))
        .await
        .expect_err("refused");
    let message = err.to_string();
    assert!(matches!(err, LoadError::SpecMismatch { .. }), "{message}");
    assert!(message.contains("kinds_echo_bool"), "{message}");
}
