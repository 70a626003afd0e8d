//! A `tools/call` request read in one pass: what the direct HTTP path and the stdio front
//! answer without rmcp. Anything that does not read as one goes to rmcp as it came.

use std::borrow::Cow;

use rmcp::model::{CallToolRequestParams, RequestId};
use serde::Deserialize;

/// The method the direct paths answer.
pub const TOOLS_CALL: &str = "tools/call";

/// A JSON-RPC 2.0 `tools/call` request with an id and well-formed parameters.
pub struct PlainCall {
    /// The request's id.
    pub id: RequestId,
    /// The call's parameters.
    pub params: CallToolRequestParams,
}

/// A request's envelope, read only as far as a `tools/call` needs.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    id: RequestId,
    #[serde(borrow)]
    method: Cow<'a, str>,
    params: CallToolRequestParams,
}

impl PlainCall {
    /// The call in `message`, when it is a single `tools/call` request; `None` for anything
    /// else (another method, a notification, a batch, a response, not JSON).
    pub fn parse(message: &[u8]) -> Option<Self> {
        let envelope: Envelope = serde_json::from_slice(message).ok()?;
        (envelope.jsonrpc == "2.0" && envelope.method == TOOLS_CALL).then_some(Self {
            id: envelope.id,
            params: envelope.params,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_jsonrpc_2_tools_call_request_with_an_id_reads_as_one() {
        let call = br#"{"params":{"name":"echo","arguments":{"m":"\u00e9"}},"method":"tools/call","id":"a\"b","jsonrpc":"2.0"}"#;
        let read = PlainCall::parse(call).expect("a call");
        assert_eq!(read.id, RequestId::String("a\"b".into()));
        assert_eq!(read.params.name, "echo");
        assert_eq!(
            read.params.arguments.and_then(|a| a.get("m").cloned()),
            Some(serde_json::json!("é"))
        );
        for other in [
            &br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"echo"}}"#[..],
            br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}}"#,
            br#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}"#,
            br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"echo"}}"#,
            br#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}]"#,
            br#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            b"not json",
        ] {
            assert!(
                PlainCall::parse(other).is_none(),
                "{}",
                String::from_utf8_lossy(other)
            );
        }
    }
}
