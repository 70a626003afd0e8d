//! A tool result as an MCP `CallToolResult`, including the content-block convention.
//!
//! A tool's result is a JSON object. By default it becomes the call's structured content and
//! its text. A tool that wants to hand the agent other content — images, audio, embedded
//! resources, several blocks — puts a list of MCP content blocks (`{"type": "text" | "image" |
//! "audio" | "resource" | "resource_link", ...}` as in the MCP schema) under the key
//! [`CONTENT_KEY`]: those blocks become the result's content, and the other keys, if any, its
//! structured content. The guest SDK's `chitin_sdk::content` builds such results.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

use crate::error::ToolError;
use crate::runtime::CallOutput;

/// The result key that carries MCP content blocks.
pub const CONTENT_KEY: &str = "$content";

/// The MCP result of a call that succeeded with `output`. A result the host cut to the call's
/// output cap is not the tool's result (its JSON is broken off, so it cannot be the structured
/// content a tool's output schema promises): its text is handed over, marked as an error, so a
/// client neither takes it for whole nor refuses it as not matching the schema.
pub fn success(output: CallOutput) -> CallToolResult {
    if output.truncated_from.is_some() {
        return CallToolResult::error(vec![ContentBlock::text(output.text)]);
    }
    let Some(Value::Object(mut object)) = output.json() else {
        return CallToolResult::success(vec![ContentBlock::text(output.text)]);
    };
    let Some(blocks) = object.remove(CONTENT_KEY) else {
        let mut result = CallToolResult::success(vec![ContentBlock::text(output.text)]);
        result.structured_content = Some(Value::Object(object));
        return result;
    };
    match serde_json::from_value::<Vec<ContentBlock>>(blocks) {
        Ok(blocks) => {
            let mut result = CallToolResult::success(blocks);
            result.structured_content = (!object.is_empty()).then_some(Value::Object(object));
            result
        }
        Err(e) => failure(&ToolError::ExecutionFailed(format!(
            "the tool's `{CONTENT_KEY}` is not a list of MCP content blocks: {e}"
        ))),
    }
}

/// The MCP result of a failed call: `isError` with the error kind first.
pub fn failure(error: &ToolError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "{}: {error}",
        error.kind()
    ))])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(text: &str) -> CallOutput {
        CallOutput {
            text: text.into(),
            truncated_from: None,
        }
    }

    #[test]
    fn a_result_cut_to_the_cap_is_its_text_marked_as_an_error() {
        let cut = CallOutput {
            text: "{\"content\":\"abc\n[chitin: output truncated: showing 16 of 99 bytes]".into(),
            truncated_from: Some(99),
        };
        let result = success(cut.clone());
        assert_eq!(result.is_error, Some(true));
        assert_eq!(result.structured_content, None);
        assert_eq!(
            result.content[0].as_text().map(|t| t.text.as_str()),
            Some(cut.text.as_str())
        );
    }

    #[test]
    fn a_plain_object_is_structured_content_and_text() {
        let result = success(output(r#"{"a":1}"#));
        assert_eq!(result.structured_content, Some(serde_json::json!({"a": 1})));
        assert_eq!(result.is_error, Some(false));
        assert_eq!(result.content.len(), 1);
    }

    #[test]
    fn content_blocks_become_the_content_and_the_rest_structured() {
        let result = success(output(
            r#"{"$content":[{"type":"text","text":"hi"},{"type":"image","data":"AAAA","mimeType":"image/png"}],"n":2}"#,
        ));
        assert_eq!(result.content.len(), 2);
        assert_eq!(result.structured_content, Some(serde_json::json!({"n": 2})));
        let only_blocks = success(output(r#"{"$content":[{"type":"text","text":"hi"}]}"#));
        assert_eq!(only_blocks.structured_content, None);
    }

    #[test]
    fn malformed_blocks_are_an_error_result() {
        let result = success(output(r#"{"$content":[{"type":"hologram"}]}"#));
        assert_eq!(result.is_error, Some(true));
    }
}
