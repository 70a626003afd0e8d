//! Guest SDK for chitin tools: write a tool as a plain Rust function over serde types, and export
//! one or more of them as a WebAssembly component of the `chitin:tool` contract.
//!
//! A tool is `fn(Args) -> Result<Out, ToolError>`. `Args` derives `Deserialize` + `JsonSchema`
//! (its doc comments become the argument descriptions the agent reads); `Out` derives
//! `Serialize` and should be a struct, since a result is a JSON object. [`export_tools!`] turns a
//! function returning the component's [`Tool`]s into the component's exports.
//!
//! A complete component (`crate-type = ["cdylib"]`, built with
//! `cargo build --target wasm32-wasip2`; its `Cargo.toml` needs `chitin-sdk`, `serde` and
//! `schemars`):
//!
//! ```
//! use chitin_sdk::prelude::*;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct EchoArgs {
//!     /// The message to echo back
//!     message: String,
//! }
//!
//! #[derive(Serialize, JsonSchema)]
//! struct EchoOutput {
//!     /// The message, unchanged
//!     message: String,
//! }
//!
//! fn echo(args: EchoArgs) -> Result<EchoOutput, ToolError> {
//!     chitin_sdk::log::debug("echoing");
//!     Ok(EchoOutput { message: args.message })
//! }
//!
//! fn tools() -> Vec<Tool> {
//!     vec![
//!         Tool::new("echo", "Returns its input unchanged.", echo)
//!             .read_only()
//!             .idempotent()
//!             .output_schema::<EchoOutput>(),
//!     ]
//! }
//!
//! chitin_sdk::export_tools!(tools);
//! # assert_eq!(tools()[0].call(r#"{"message":"hi"}"#).unwrap(), r#"{"message":"hi"}"#);
//! ```
//!
//! Arguments that fail to deserialise become [`ToolError::InvalidArgs`] naming the field; a call
//! to a name the component does not carry becomes [`ToolError::NotFound`] listing the names it
//! does. Tools can be tested natively through [`Tool::call`] and [`Tool::spec`].

pub mod budget;
pub mod content;
mod error;
#[cfg(feature = "http")]
pub mod http;
pub mod invoke;
pub mod json;
pub mod log;
pub mod progress;
mod schema;
pub mod secrets;
mod tool;

pub use error::ToolError;
pub use schema::{input_schema, output_schema};
pub use tool::{Annotations, Spec, Tool, dispatch};

pub use schemars;
pub use serde;
pub use serde_json;

/// Bindings generated from the `chitin:tool` contract (world `tool-component`).
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "tool-component",
        pub_export_macro: true,
        default_bindings_module: "chitin_sdk::bindings",
        generate_all,
    });
}

/// What a tool author needs in scope.
pub mod prelude {
    pub use crate::{NoArgs, Tool, ToolError};
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
    pub use serde_json::{Value, json};
}

/// The argument type of a tool that takes no arguments (`{}`).
#[derive(Debug, Clone, Copy, Default, serde::Deserialize, schemars::JsonSchema)]
pub struct NoArgs {}

/// Exports a component's tools: give it a function (or non-capturing closure) returning
/// `Vec<Tool>`. Use once per component crate: `chitin_sdk::export_tools!(tools);`
#[macro_export]
macro_rules! export_tools {
    ($tools:expr $(,)?) => {
        #[doc(hidden)]
        struct __ChitinTools;

        impl $crate::__private::Guest for __ChitinTools {
            fn specs() -> ::std::vec::Vec<$crate::__private::WitToolSpec> {
                $crate::__private::specs($tools)
            }

            fn call(
                name: ::std::string::String,
                args_json: ::std::string::String,
            ) -> ::core::result::Result<::std::string::String, $crate::__private::WitToolError>
            {
                $crate::__private::call($tools, &name, &args_json)
            }
        }

        $crate::bindings::export!(__ChitinTools with_types_in $crate::bindings);
    };
}

/// Support for [`export_tools!`]; not a stable API.
#[doc(hidden)]
pub mod __private {
    use crate::bindings::chitin::tool::types::Annotations as WitAnnotations;
    pub use crate::bindings::chitin::tool::types::{
        ToolError as WitToolError, ToolSpec as WitToolSpec,
    };
    pub use crate::bindings::exports::chitin::tool::tool::Guest;
    use crate::{Tool, dispatch};

    /// The WIT specs of the tools.
    pub fn specs(tools: fn() -> Vec<Tool>) -> Vec<WitToolSpec> {
        tools()
            .iter()
            .map(|tool| {
                let spec = tool.spec();
                WitToolSpec {
                    name: spec.name,
                    description: spec.description,
                    input_schema: spec.input_schema.to_string(),
                    output_schema: spec.output_schema.map(|schema| schema.to_string()),
                    annotations: WitAnnotations {
                        read_only: spec.annotations.read_only,
                        destructive: spec.annotations.destructive,
                        idempotent: spec.annotations.idempotent,
                        open_world: spec.annotations.open_world,
                    },
                }
            })
            .collect()
    }

    /// Runs the named tool, converting the error to the WIT type.
    pub fn call(
        tools: fn() -> Vec<Tool>,
        name: &str,
        args_json: &str,
    ) -> Result<String, WitToolError> {
        dispatch(&tools(), name, args_json).map_err(Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::prelude::*;
    use super::{dispatch, input_schema, output_schema};

    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    #[allow(dead_code)]
    enum Mode {
        Fast,
        Slow,
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Args {
        /// A required name
        name: String,
        /// An optional label
        label: Option<String>,
        /// An optional limit
        limit: Option<u32>,
        /// Any JSON value
        data: Value,
        mode: Option<Mode>,
        count: u64,
        #[serde(default)]
        tag: Option<String>,
        /// Any JSON value, or nothing
        extra: Option<Value>,
        /// A nested object
        inner: Option<Inner>,
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Inner {
        x: i32,
    }

    #[derive(Serialize, JsonSchema)]
    struct Out {
        name: String,
    }

    fn run(args: Args) -> Result<Out, ToolError> {
        Ok(Out { name: args.name })
    }

    fn tools() -> Vec<Tool> {
        vec![
            Tool::new("run", "Runs.", run).output_schema::<Out>(),
            Tool::new("nothing", "Takes nothing.", |_: NoArgs| Ok(json!({}))),
        ]
    }

    /// Every `type` keyword in the schema, wherever it is.
    fn types(schema: &Value, found: &mut Vec<Value>) {
        match schema {
            Value::Object(map) => {
                for (key, value) in map {
                    if key == "type" {
                        found.push(value.clone());
                    }
                    types(value, found);
                }
            }
            Value::Array(items) => items.iter().for_each(|item| types(item, found)),
            _ => {}
        }
    }

    #[test]
    fn no_type_arrays_anywhere() {
        let schema = input_schema::<Args>();
        let mut found = Vec::new();
        types(&schema, &mut found);
        assert!(!found.is_empty());
        assert!(found.iter().all(Value::is_string), "{schema:#}");
        assert!(!schema.to_string().contains("null"), "{schema:#}");
    }

    #[test]
    fn optional_fields_keep_their_single_type() {
        let schema = input_schema::<Args>();
        let props = &schema["properties"];
        assert_eq!(props["label"]["type"], "string");
        assert_eq!(props["label"]["description"], "An optional label");
        assert_eq!(props["limit"]["type"], "integer");
        assert_eq!(props["limit"]["minimum"], 0);
        assert!(props["limit"].get("format").is_none());
        assert_eq!(props["mode"]["type"], "string");
        assert_eq!(props["mode"]["enum"], json!(["fast", "slow"]));
        assert_eq!(props["tag"], json!({ "type": "string" }));
        assert_eq!(
            props["extra"],
            json!({ "description": "Any JSON value, or nothing" })
        );
        assert_eq!(props["inner"]["type"], "object");
        assert_eq!(props["inner"]["description"], "A nested object");
        assert_eq!(props["inner"]["required"], json!(["x"]));
    }

    #[test]
    fn any_value_has_no_type() {
        let schema = input_schema::<Args>();
        assert_eq!(
            schema["properties"]["data"],
            json!({ "description": "Any JSON value" })
        );
    }

    #[test]
    fn required_lists_only_non_optional_fields() {
        let schema = input_schema::<Args>();
        let mut required: Vec<&str> = schema["required"]
            .as_array()
            .expect("required is an array")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        required.sort_unstable();
        assert_eq!(required, ["count", "data", "name"]);
    }

    #[test]
    fn top_level_is_an_object_without_meta_keys() {
        let schema = input_schema::<Args>();
        assert_eq!(schema["type"], "object");
        for key in ["$schema", "$defs", "title"] {
            assert!(schema.get(key).is_none(), "{key} in {schema:#}");
        }
        assert!(!schema.to_string().contains("$ref"));
        assert_eq!(
            input_schema::<NoArgs>(),
            json!({ "type": "object", "properties": {}, "required": [] })
        );
        assert_eq!(
            input_schema::<Value>(),
            json!({ "type": "object", "properties": {}, "required": [] })
        );
    }

    #[test]
    fn output_schema_is_an_object() {
        let schema = output_schema::<Out>();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["name"]));
        let spec = tools()[0].spec();
        assert_eq!(spec.output_schema, Some(schema));
        assert_eq!(tools()[1].spec().output_schema, None);
    }

    #[test]
    fn missing_field_is_invalid_args_naming_it() {
        let err = dispatch(&tools(), "run", r#"{"data": 1, "count": 2}"#).unwrap_err();
        let ToolError::InvalidArgs(message) = err else {
            panic!("expected InvalidArgs, got {err:?}");
        };
        assert!(message.contains("`name`"), "{message}");
    }

    #[test]
    fn wrong_type_is_invalid_args_naming_the_field() {
        let err = dispatch(
            &tools(),
            "run",
            r#"{"name": "a", "data": 1, "count": "two"}"#,
        )
        .unwrap_err();
        let ToolError::InvalidArgs(message) = err else {
            panic!("expected InvalidArgs, got {err:?}");
        };
        assert!(message.starts_with("`count`: invalid type"), "{message}");
    }

    #[test]
    fn a_nested_field_of_the_wrong_type_is_named_by_its_path() {
        let err = dispatch(
            &tools(),
            "run",
            r#"{"name": "a", "data": 1, "count": 2, "inner": {"x": "one"}}"#,
        )
        .unwrap_err();
        let ToolError::InvalidArgs(message) = err else {
            panic!("expected InvalidArgs, got {err:?}");
        };
        assert!(message.starts_with("`inner.x`: invalid type"), "{message}");
    }

    #[test]
    fn malformed_json_is_invalid_args() {
        let err = dispatch(&tools(), "run", "{").unwrap_err();
        assert!(matches!(err, ToolError::InvalidArgs(_)), "{err:?}");
    }

    #[test]
    fn good_call_serialises_the_result() {
        let out = dispatch(
            &tools(),
            "run",
            r#"{"name": "a", "data": null, "count": 2}"#,
        );
        assert_eq!(out.as_deref(), Ok(r#"{"name":"a"}"#));
    }

    #[test]
    fn omitted_arguments_mean_an_empty_object() {
        assert_eq!(dispatch(&tools(), "nothing", "").as_deref(), Ok("{}"));
        assert_eq!(dispatch(&tools(), "nothing", "null").as_deref(), Ok("{}"));
    }

    #[test]
    fn unknown_tool_is_not_found_listing_the_tools() {
        let err = dispatch(&tools(), "x", "{}").unwrap_err();
        assert_eq!(
            err,
            ToolError::NotFound("unknown tool `x`; this component carries: run, nothing".into())
        );
    }

    #[test]
    fn errors_convert_to_the_wit_type() {
        let wit: super::__private::WitToolError = ToolError::invalid_args("bad").into();
        assert!(matches!(wit, super::__private::WitToolError::InvalidArgs(m) if m == "bad"));
        let wit: super::__private::WitToolError = ToolError::Timeout.into();
        assert!(matches!(wit, super::__private::WitToolError::Timeout));
    }

    #[test]
    fn wit_specs_carry_schemas_as_json_text() {
        let specs = super::__private::specs(tools);
        assert_eq!(specs.len(), 2);
        let schema: Value = serde_json::from_str(&specs[0].input_schema).expect("valid JSON");
        assert_eq!(schema, input_schema::<Args>());
        assert!(specs[0].output_schema.is_some());
    }
}
