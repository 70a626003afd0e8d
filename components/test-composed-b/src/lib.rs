//! Test fixture: a second tool component importing the text library.

use chitin_sdk::prelude::*;

mod libs {
    wit_bindgen::generate!({
        path: "../test-lib-text/wit",
        inline: "package chitin:test-composed-b;
                 world imports { import chitin:test-text/text@0.1.0; }",
        generate_all,
    });
}

use libs::chitin::test_text::text;

#[derive(Serialize, JsonSchema)]
struct CallsOutput {
    /// Calls the library instance had served, per call made
    calls: Vec<u32>,
}

fn text_calls_b(_: NoArgs) -> Result<CallsOutput, ToolError> {
    Ok(CallsOutput {
        calls: vec![text::calls(), text::calls()],
    })
}

fn tools() -> Vec<Tool> {
    vec![Tool::new(
        "text_calls_b",
        "Calls the text library twice.",
        text_calls_b,
    )]
}

chitin_sdk::export_tools!(tools);
