//! Test fixture: the leanest possible tool against chitin:tool@0.1.0, written with wit-bindgen
//! directly (no SDK, no serde). `minimal_echo` hands its argument text back unchanged, so the
//! benchmark can separate the host's own per-call cost from what a guest SDK adds.

wit_bindgen::generate!({
    path: "../../wit",
    world: "tool-component",
    generate_all,
});

use chitin::tool::types::{Annotations, ToolError, ToolSpec};
use exports::chitin::tool::tool::Guest;

struct Minimal;

impl Guest for Minimal {
    fn specs() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "minimal_echo".into(),
            description: "Returns its arguments unchanged (benchmark fixture).".into(),
            input_schema: r#"{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}"#.into(),
            output_schema: None,
            annotations: Annotations {
                read_only: true,
                destructive: false,
                idempotent: true,
                open_world: false,
            },
        }]
    }

    fn call(name: String, args_json: String) -> Result<String, ToolError> {
        if name == "minimal_echo" {
            Ok(args_json)
        } else {
            Err(ToolError::NotFound(format!("unknown tool `{name}`")))
        }
    }
}

export!(Minimal);
