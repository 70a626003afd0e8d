//! Test fixture: the tools the `@modelcontextprotocol/conformance` suite's tools-call scenarios
//! call by name, written as an ordinary chitin component so the suite exercises the real path
//! through WebAssembly: content blocks through the `$content` result convention, log entries
//! through `chitin:host/log`, progress through `chitin:host/progress`.

use std::time::Duration;

use chitin_sdk::content::Content;
use chitin_sdk::prelude::*;

/// A 1×1 PNG.
const PIXEL_PNG: &[u8] = include_bytes!("../assets/pixel.png");
/// Eight samples of 8 kHz 8-bit mono silence, as WAV.
const SILENCE_WAV: &[u8] = include_bytes!("../assets/silence.wav");
/// The pause between reports the scenarios ask for, so clients see them arrive during the call.
const PAUSE: Duration = Duration::from_millis(50);

fn simple_text(_: NoArgs) -> Result<Content, ToolError> {
    Ok(Content::new().text("This is a simple text response for testing."))
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

fn tools() -> Vec<Tool> {
    vec![
        Tool::new("test_simple_text", "Returns one text block.", simple_text).read_only(),
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
            "test_error_handling",
            "Always fails with an execution error.",
            error_handling,
        )
        .read_only(),
    ]
}

chitin_sdk::export_tools!(tools);
