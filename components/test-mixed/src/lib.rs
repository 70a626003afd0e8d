//! Test fixture: a `chitin:tool` component that also exports a plain typed function. chitin
//! serves its `chitin:tool` tools alone; the audit notes the other export.

wit_bindgen::generate!({
    path: ["../../wit", "world.wit"],
    world: "fixture:mixed/mixed",
    generate_all,
});

use chitin::tool::types::{Annotations, ToolError, ToolSpec};
use exports::chitin::tool::tool::Guest as ToolGuest;

struct Mixed;

impl ToolGuest for Mixed {
    fn specs() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "mixed_echo".into(),
            description: "Returns its arguments unchanged.".into(),
            input_schema: r#"{"type":"object"}"#.into(),
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
        if name == "mixed_echo" {
            Ok(args_json)
        } else {
            Err(ToolError::NotFound(format!("unknown tool `{name}`")))
        }
    }
}

impl Guest for Mixed {
    fn extra() -> u32 {
        7
    }
}

export!(Mixed);
