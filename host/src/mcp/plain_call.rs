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

/// A request's envelope, read only as far as a `tools/call` needs, its parameters as `P`.
#[derive(Deserialize)]
struct Envelope<'a, P> {
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    id: RequestId,
    #[serde(borrow)]
    method: Cow<'a, str>,
    params: P,
}

impl PlainCall {
    /// The call in `message`, when it is a single `tools/call` request; `None` for anything
    /// else (another method, a notification, a batch, a response, not JSON).
    pub fn parse(message: &[u8]) -> Option<Self> {
        let envelope: Envelope<CallToolRequestParams> = serde_json::from_slice(message).ok()?;
        (envelope.jsonrpc == "2.0" && envelope.method == TOOLS_CALL).then_some(Self {
            id: envelope.id,
            params: envelope.params,
        })
    }
}

impl PlainCall {
    /// For a `tools/call` request with an id whose parameters are not a call's (`name` missing
    /// or not a string, `arguments` not an object), its id and what is wrong: the answer is an
    /// invalid-params error naming it, not rmcp's "method not found" for a method it serves.
    pub fn malformed(message: &[u8]) -> Option<(RequestId, String)> {
        let envelope: Envelope<Option<serde_json::Value>> = serde_json::from_slice(message).ok()?;
        if envelope.jsonrpc != "2.0" || envelope.method != TOOLS_CALL {
            return None;
        }
        let params = envelope.params.unwrap_or(serde_json::Value::Null);
        let wrong = serde_json::from_value::<CallToolRequestParams>(params).err()?;
        Some((
            envelope.id,
            format!(
                "invalid tools/call params ({wrong}): send {{\"name\": the tool's name, \
                 \"arguments\": an object}}"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tools_call_with_params_that_are_not_a_calls_is_told_what_is_wrong() {
        for (message, says) in [
            (&br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":[1]}}"#[..], "invalid type"),
            (br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"arguments":{}}}"#, "name"),
            (br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":5}}"#, "invalid type"),
            (br#"{"jsonrpc":"2.0","id":3,"method":"tools/call"}"#, "invalid type"),
        ] {
            let (id, why) = PlainCall::malformed(message).expect("malformed");
            assert_eq!(id, RequestId::Number(3));
            assert!(why.contains(says) && why.contains("invalid tools/call params"), "{why}");
        }
        for fine in [
            &br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo"}}"#[..],
            br#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":[1]}"#,
            br#"{"jsonrpc":"2.0","method":"tools/call","params":[1]}"#,
        ] {
            assert!(PlainCall::malformed(fine).is_none());
        }
    }

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
