//! Test fixture: the tools the `@modelcontextprotocol/conformance` suite's tools-call scenarios
//! call by name, written as an ordinary chitin component so the suite exercises the real path
//! through WebAssembly: content blocks through the `$content` result convention, log entries
//! through `chitin:host/log`, progress through `chitin:host/progress`, questions through the
//! host's approvals (the policy's and `chitin:host/approval`) and through `chitin:host/client`
//! (the input-required scenarios' elicitation, sampling and roots).

use std::time::Duration;

use chitin_sdk::content::Content;
use chitin_sdk::prelude::*;
use host::chitin::host::client::{self, Method, Question};

/// Bindings of the host interfaces this fixture imports beyond the SDK's.
mod host {
    wit_bindgen::generate!({
        path: "../../wit",
        inline: "package chitin:conformance-imports;
                 world imports {
                     import chitin:host/approval@0.1.0;
                     import chitin:host/client@0.1.0;
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

/// Ask the client every question at once; the answers in order.
fn ask(questions: &[(&str, Method, Value)]) -> Result<Vec<Value>, ToolError> {
    let questions: Vec<Question> = questions
        .iter()
        .map(|(key, method, params)| Question {
            key: (*key).to_owned(),
            method: *method,
            params: params.to_string(),
        })
        .collect();
    client::ask(&questions)
        .map_err(ToolError::PermissionDenied)?
        .iter()
        .map(|a| {
            chitin_sdk::serde_json::from_str(a)
                .map_err(|e| ToolError::ExternalService(format!("unreadable answer: {e}")))
        })
        .collect()
}

/// An `elicitation/create` form asking for one string or boolean field.
fn form(message: &str, field: &str, kind: &str) -> Value {
    json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": {field: {"type": kind}},
            "required": [field]
        }
    })
}

/// A `sampling/createMessage` request for one user message.
fn sampling(text: &str, max_tokens: u32) -> Value {
    json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        "maxTokens": max_tokens
    })
}

/// A form answer's field, as text.
fn field(answer: &Value, name: &str) -> String {
    match answer.pointer(&format!("/content/{name}")) {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => format!("(no {name})"),
    }
}

/// A sampling answer's text.
fn sampled(answer: &Value) -> String {
    answer
        .pointer("/content/text")
        .and_then(Value::as_str)
        .unwrap_or("(no text)")
        .to_owned()
}

/// A roots answer's URIs.
fn root_uris(answer: &Value) -> String {
    let uris: Vec<&str> = answer
        .get("roots")
        .and_then(Value::as_array)
        .map(|roots| {
            roots
                .iter()
                .filter_map(|r| r.get("uri")?.as_str())
                .collect()
        })
        .unwrap_or_default();
    uris.join(", ")
}

fn ask_name(_: NoArgs) -> Result<Content, ToolError> {
    let answers = ask(&[(
        "user_name",
        Method::Elicit,
        form("What is your name?", "name", "string"),
    )])?;
    Ok(Content::new().text(format!("Hello, {}!", field(&answers[0], "name"))))
}

fn ask_sampling(_: NoArgs) -> Result<Content, ToolError> {
    let answers = ask(&[(
        "capital_question",
        Method::Sample,
        sampling("What is the capital of France?", 100),
    )])?;
    Ok(Content::new().text(format!("Sampling response: {}", sampled(&answers[0]))))
}

fn ask_roots(_: NoArgs) -> Result<Content, ToolError> {
    let answers = ask(&[("client_roots", Method::ListRoots, json!({}))])?;
    Ok(Content::new().text(format!("Client roots: {}", root_uris(&answers[0]))))
}

/// The host verified the request state before replaying the answer, so an answer means it did.
fn ask_confirm(_: NoArgs) -> Result<Content, ToolError> {
    let answers = ask(&[(
        "confirm",
        Method::Elicit,
        form("Please confirm", "ok", "boolean"),
    )])?;
    Ok(Content::new().text(format!(
        "state-ok: confirmed = {}",
        field(&answers[0], "ok")
    )))
}

fn ask_several(_: NoArgs) -> Result<Content, ToolError> {
    let answers = ask(&[
        (
            "user_name",
            Method::Elicit,
            form("What is your name?", "name", "string"),
        ),
        (
            "greeting",
            Method::Sample,
            sampling("Generate a greeting", 50),
        ),
        ("client_roots", Method::ListRoots, json!({})),
    ])?;
    Ok(Content::new().text(format!(
        "name: {}; greeting: {}; roots: {}",
        field(&answers[0], "name"),
        sampled(&answers[1]),
        root_uris(&answers[2])
    )))
}

fn ask_twice(_: NoArgs) -> Result<Content, ToolError> {
    let name = ask(&[(
        "step1",
        Method::Elicit,
        form("Step 1: What is your name?", "name", "string"),
    )])?;
    let color = ask(&[(
        "step2",
        Method::Elicit,
        form("Step 2: What is your favorite color?", "color", "string"),
    )])?;
    Ok(Content::new().text(format!(
        "{}'s favorite color is {}",
        field(&name[0], "name"),
        field(&color[0], "color")
    )))
}

/// Asks only what the client can answer.
fn ask_what_is_supported(_: NoArgs) -> Result<Content, ToolError> {
    let supported = client::supported();
    let mut questions = Vec::new();
    if supported.contains(&Method::Elicit) {
        questions.push((
            "user_name",
            Method::Elicit,
            form("What is your name?", "name", "string"),
        ));
    }
    if supported.contains(&Method::Sample) {
        questions.push((
            "capital_question",
            Method::Sample,
            sampling("What is the capital of France?", 100),
        ));
    }
    if questions.is_empty() {
        return Ok(Content::new().text("the client can answer nothing, so nothing was asked"));
    }
    let answers = ask(&questions)?;
    Ok(Content::new().text(format!("{} answers received", answers.len())))
}

/// Needs the client's sampling: a client that did not declare it gets -32021.
fn needs_sampling(_: NoArgs) -> Result<Content, ToolError> {
    let answers = ask(&[("sample", Method::Sample, sampling("Say hello", 20))])?;
    Ok(Content::new().text(sampled(&answers[0])))
}

#[derive(Deserialize, JsonSchema)]
struct PromptArgs {
    /// The prompt for the client's model
    prompt: String,
}

fn sample_prompt(args: PromptArgs) -> Result<Content, ToolError> {
    let answers = ask(&[("sample", Method::Sample, sampling(&args.prompt, 100))])?;
    Ok(Content::new().text(format!("LLM response: {}", sampled(&answers[0]))))
}

#[derive(Deserialize, JsonSchema)]
struct MessageArgs {
    /// The message shown to the client's user
    message: String,
}

/// The outcome of an elicitation, as the 2025 scenarios print it.
fn elicited(answer: &Value) -> String {
    let action = answer.get("action").and_then(Value::as_str).unwrap_or("?");
    let content = answer.get("content").cloned().unwrap_or(Value::Null);
    format!("action={action}, content={content}")
}

fn elicit_user(args: MessageArgs) -> Result<Content, ToolError> {
    let params = json!({
        "mode": "form",
        "message": args.message,
        "requestedSchema": {
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"}
            },
            "required": ["username", "email"]
        }
    });
    let answers = ask(&[("user", Method::Elicit, params)])?;
    Ok(Content::new().text(format!("User response: {}", elicited(&answers[0]))))
}

fn elicit_form(schema: Value) -> Result<Content, ToolError> {
    let params = json!({
        "mode": "form",
        "message": "Please review and update the form fields",
        "requestedSchema": schema
    });
    let answers = ask(&[("form", Method::Elicit, params)])?;
    Ok(Content::new().text(format!("Elicitation completed: {}", elicited(&answers[0]))))
}

fn elicit_defaults(_: NoArgs) -> Result<Content, ToolError> {
    elicit_form(json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": true}
        }
    }))
}

fn elicit_enums(_: NoArgs) -> Result<Content, ToolError> {
    elicit_form(json!({
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"}
            ]},
            "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "items": {"type": "string",
                "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "items": {"anyOf": [
                {"const": "value1", "title": "First Choice"},
                {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"}
            ]}}
        }
    }))
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
            "test_input_required_result_elicitation",
            "Asks the client's user for a name (user_name), then greets them.",
            ask_name,
        )
        .read_only(),
        Tool::new(
            "test_input_required_result_sampling",
            "Asks the client's model the capital of France (capital_question).",
            ask_sampling,
        )
        .read_only(),
        Tool::new(
            "test_input_required_result_list_roots",
            "Asks the client for its roots (client_roots).",
            ask_roots,
        )
        .read_only(),
        Tool::new(
            "test_input_required_result_request_state",
            "Asks for a confirmation (confirm); says state-ok once the answer came back with \
             the signed request state.",
            ask_confirm,
        )
        .read_only(),
        Tool::new(
            "test_input_required_result_multiple_inputs",
            "Asks a name, a sampled greeting and the roots at once.",
            ask_several,
        )
        .read_only(),
        Tool::new(
            "test_input_required_result_multi_round",
            "Asks a name (step1), then a favorite color (step2): two rounds.",
            ask_twice,
        )
        .read_only(),
        Tool::new(
            "test_input_required_result_tampered_state",
            "Asks for a name (user_name); a retry with a tampered request state is refused.",
            ask_name,
        )
        .read_only(),
        Tool::new(
            "test_input_required_result_capabilities",
            "Asks only what the client declared: a name if it elicits, a sampling if it samples.",
            ask_what_is_supported,
        )
        .read_only(),
        Tool::new(
            "test_missing_capability",
            "Needs the client's sampling capability.",
            needs_sampling,
        )
        .read_only(),
        Tool::new(
            "test_sampling",
            "Asks the client's model to complete the prompt.",
            sample_prompt,
        )
        .read_only(),
        Tool::new(
            "test_elicitation",
            "Asks the client's user for a username and an email.",
            elicit_user,
        )
        .read_only(),
        Tool::new(
            "test_elicitation_sep1034_defaults",
            "Asks the client's user a form whose fields have defaults (SEP-1034).",
            elicit_defaults,
        )
        .read_only(),
        Tool::new(
            "test_elicitation_sep1330_enums",
            "Asks the client's user a form of the five enum shapes (SEP-1330).",
            elicit_enums,
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
