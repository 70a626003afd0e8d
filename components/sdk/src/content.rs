//! Results made of MCP content blocks — images, audio, embedded resources, several texts —
//! instead of one JSON object.
//!
//! The convention: a result object whose key [`CONTENT_KEY`] (`"$content"`) holds a list of
//! content blocks shaped as in the MCP schema. The host hands those blocks to the agent as the
//! call's content and any other keys of the object as its structured content. [`Content`]
//! builds such a result:
//!
//! ```
//! use chitin_sdk::content::Content;
//!
//! let result = Content::new()
//!     .text("Here is the chart:")
//!     .image(&[0x89, b'P', b'N', b'G'], "image/png");
//! let json = serde_json::to_value(&result).unwrap();
//! assert_eq!(json["$content"][1]["type"], "image");
//! assert_eq!(json["$content"][1]["data"], "iVBORw==");
//! ```

use serde::Serialize;

/// The result key that carries MCP content blocks.
pub const CONTENT_KEY: &str = "$content";

/// One MCP content block.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64-encoded.
    Image {
        /// The bytes, base64.
        data: String,
        /// Its media type, e.g. `image/png`.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// Audio, base64-encoded.
    Audio {
        /// The bytes, base64.
        data: String,
        /// Its media type, e.g. `audio/wav`.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// A resource embedded in the result.
    Resource {
        /// The resource.
        resource: Resource,
    },
}

/// The contents of an embedded resource: text or a base64 blob.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Resource {
    /// Its URI.
    pub uri: String,
    /// Its media type.
    #[serde(rename = "mimeType", skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Text contents.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Binary contents, base64.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

/// A tool result made of content blocks (serialises as `{"$content": [...]}`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Content {
    /// The blocks, in order.
    #[serde(rename = "$content")]
    pub blocks: Vec<Block>,
}

impl Content {
    /// No blocks yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a text block.
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.blocks.push(Block::Text { text: text.into() });
        self
    }

    /// Add an image block from its bytes.
    pub fn image(mut self, bytes: &[u8], mime_type: impl Into<String>) -> Self {
        self.blocks.push(Block::Image {
            data: base64(bytes),
            mime_type: mime_type.into(),
        });
        self
    }

    /// Add an audio block from its bytes.
    pub fn audio(mut self, bytes: &[u8], mime_type: impl Into<String>) -> Self {
        self.blocks.push(Block::Audio {
            data: base64(bytes),
            mime_type: mime_type.into(),
        });
        self
    }

    /// Add an embedded text resource.
    pub fn text_resource(
        mut self,
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        self.blocks.push(Block::Resource {
            resource: Resource {
                uri: uri.into(),
                mime_type: Some(mime_type.into()),
                text: Some(text.into()),
                blob: None,
            },
        });
        self
    }
}

/// Standard base64 with padding (RFC 4648), as MCP expects for binary data.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in cases {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
    }

    #[test]
    fn content_serialises_under_the_reserved_key() {
        let json =
            serde_json::to_value(Content::new().text_resource("test://r", "text/plain", "hello"))
                .unwrap();
        assert_eq!(
            json,
            serde_json::json!({"$content": [{"type": "resource", "resource":
                {"uri": "test://r", "mimeType": "text/plain", "text": "hello"}}]})
        );
    }
}
