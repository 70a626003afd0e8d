//! Test fixture: the tools the `@modelcontextprotocol/conformance` suite's tools-call scenarios
//! call by name, written as an ordinary chitin component so the suite exercises the real path
//! through WebAssembly: content blocks through the `$content` result convention, log entries
//! through `chitin:host/log`, progress through `chitin:host/progress`, questions through the
//! host's approvals (the policy's and `chitin:host/approval`).

use std::time::Duration;

use chitin_sdk::content::Content;
use chitin_sdk::prelude::*;

/// Bindings of the host interfaces this fixture imports beyond the SDK's.
mod host {
    wit_bindgen::generate!({
        path: "../../wit",
        inline: "package chitin:conformance-imports;
                 world imports {
                     import chitin:host/approval@0.1.0;
                 }",
        world: "chitin:conformance-imports/imports",
        generate_all,
    });
}

/// A 1×1 PNG.
const PIXEL_PNG: &[u8] = include_bytes!("../assets/pixel.png");
/// Eight samples of 8 kHz 8-bit mono silence, as WAV.
const SILENCE_WAV: &[u8] = include_bytes!("../assets/silence.wav");
/// The pause between reports the scenarios ask for, so clients see them arrive during the call.
const PAUSE: Duration = Duration::from_millis(50);

fn simple_text(_: NoArgs) -> Result<Content, ToolError> {
    Ok(Content::new().text("This is a simple text response for testing."))
}

#[derive(Deserialize, JsonSchema)]
struct GreetArgs {
    /// Who to greet
    name: String,
}

fn greet(args: GreetArgs) -> Result<Content, ToolError> {
    Ok(Content::new().text(format!("Hello, {}!", args.name)))
}

fn image_content(_: NoArgs) -> Result<Content, ToolError> {
    Ok(Content::new().image(PIXEL_PNG, "image/png"))
}

fn audio_content(_: NoArgs) -> Result<Content, ToolError> {
    Ok(Content::new().audio(SILENCE_WAV, "audio/wav"))
}

fn embedded_resource(_: NoArgs) -> Result<Content, ToolError> {
    Ok(Content::new().text_resource(
        "test://embedded-resource",
        "text/plain",
        "This is an embedded resource content.",
    ))
}

fn multiple_content_types(_: NoArgs) -> Result<Content, ToolError> {
    Ok(Content::new()
        .text("Multiple content types test:")
        .image(PIXEL_PNG, "image/png")
        .text_resource(
            "test://mixed-content-resource",
            "application/json",
            r#"{"test":"data","value":123}"#,
        ))
}

fn with_logging(_: NoArgs) -> Result<Content, ToolError> {
    chitin_sdk::log::info("Tool execution started");
    std::thread::sleep(PAUSE);
    chitin_sdk::log::info("Tool processing data");
    std::thread::sleep(PAUSE);
    chitin_sdk::log::info("Tool execution completed");
    Ok(Content::new().text("Tool with logging executed successfully"))
}

fn with_progress(_: NoArgs) -> Result<Content, ToolError> {
    for (i, done) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        if i > 0 {
            std::thread::sleep(PAUSE);
        }
        chitin_sdk::progress::report(done, Some(100.0), None);
    }
    Ok(Content::new().text("Tool with progress executed successfully"))
}

fn error_handling(_: NoArgs) -> Result<Content, ToolError> {
    Err(ToolError::ExecutionFailed(
        "This tool intentionally returns an error for testing".into(),
    ))
}

/// The schema of the suite's `json-schema-2020-12` scenario: 2020-12 keywords kept as written.
fn schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"}
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false
    })
}

fn schema_2020_12_tool(args: Value) -> Result<Content, ToolError> {
    Ok(Content::new().text(format!("Received: {args}")))
}

/// Arguments mirrored into `Mcp-Param-*` HTTP headers (`x-mcp-header`), which the HTTP front
/// checks against the body.
fn custom_headers_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "region": {"type": "string", "description": "Plain ASCII string value", "x-mcp-header": "Region"},
            "priority": {"type": "integer", "description": "Integer numeric value", "x-mcp-header": "Priority"},
            "verbose": {"type": "boolean", "description": "Boolean value", "x-mcp-header": "Verbose"}
        },
        "required": []
    })
}

fn custom_headers(args: Value) -> Result<Content, ToolError> {
    Ok(Content::new().text(format!("Headers validated: {args}")))
}

/// The manifest marks this tool `approval = "ask"`: the host asks before it runs.
fn approved(_: NoArgs) -> Result<Content, ToolError> {
    Ok(Content::new().text("approved and ran"))
}

/// Asks for approval itself, through `chitin:host/approval`, before it "acts".
fn asks(_: NoArgs) -> Result<Content, ToolError> {
    host::chitin::host::approval::request("the fixture wants to act")
        .map_err(ToolError::PermissionDenied)?;
    Ok(Content::new().text("the component's question was approved"))
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new("test_simple_text", "Returns one text block.", simple_text).read_only(),
        Tool::new("greet", "Returns `Hello, {name}!` at once.", greet).read_only(),
        Tool::new(
            "test_image_content",
            "Returns one PNG image block.",
            image_content,
        )
        .read_only(),
        Tool::new(
            "test_audio_content",
            "Returns one WAV audio block.",
            audio_content,
        )
        .read_only(),
        Tool::new(
            "test_embedded_resource",
            "Returns one embedded text resource.",
            embedded_resource,
        )
        .read_only(),
        Tool::new(
            "test_multiple_content_types",
            "Returns a text, an image and an embedded resource.",
            multiple_content_types,
        )
        .read_only(),
        Tool::new(
            "test_tool_with_logging",
            "Logs three info entries 50 ms apart while it runs.",
            with_logging,
        )
        .read_only(),
        Tool::new(
            "test_tool_with_progress",
            "Reports progress 0, 50 and 100 of 100, 50 ms apart.",
            with_progress,
        )
        .read_only(),
        Tool::new(
            "test_logging_tool",
            "Logs three info entries 50 ms apart while it runs.",
            with_logging,
        )
        .read_only(),
        Tool::new(
            "test_error_handling",
            "Always fails with an execution error.",
            error_handling,
        )
        .read_only(),
        Tool::new(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features",
            schema_2020_12_tool,
        )
        .input_schema(schema_2020_12)
        .read_only(),
        Tool::new(
            "test_custom_headers",
            "A tool with x-mcp-header annotations to test custom header mirroring and encoding",
            custom_headers,
        )
        .input_schema(custom_headers_schema)
        .read_only(),
        Tool::new(
            "test_approval",
            "Runs only after a person approves it (the manifest asks).",
            approved,
        )
        .read_only(),
        Tool::new(
            "test_streaming_elicitation",
            "Runs only after a person approves it: the question reaches a 2026-07-28 client in \
             an input-required result, never as a request on the response stream.",
            approved,
        )
        .read_only(),
        Tool::new(
            "test_component_approval",
            "Asks for a person's approval itself (chitin:host/approval) before it acts.",
            asks,
        )
        .read_only(),
    ]
}

chitin_sdk::export_tools!(tools);
