//! What a client learns before it has a token: the RFC 9728 protected-resource metadata and the
//! `WWW-Authenticate` challenges (RFC 6750 §3) that point to it.

use serde_json::{Value, json};
use url::Url;

/// The well-known path of protected-resource metadata (RFC 9728 §3).
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The paths the metadata of `resource` is served at: the path-suffixed form RFC 9728 §3.1
/// derives from the resource URI, and the bare well-known path for clients that ask the root.
pub fn paths(resource: &Url) -> Vec<String> {
    let suffixed = format!("{WELL_KNOWN}{}", resource_path(resource));
    if suffixed == WELL_KNOWN {
        vec![suffixed]
    } else {
        vec![suffixed, WELL_KNOWN.to_owned()]
    }
}

/// The metadata URL of `resource` (RFC 9728 §3.1: the well-known path between the authority and
/// the resource's path).
pub fn url(resource: &Url) -> String {
    let mut url = resource.clone();
    url.set_path(&format!("{WELL_KNOWN}{}", resource_path(resource)));
    url.set_query(None);
    url.to_string()
}

fn resource_path(resource: &Url) -> &str {
    resource.path().trim_end_matches('/')
}

/// The metadata document.
pub fn document(resource: &str, issuer: &str, scopes: &[&str]) -> Value {
    json!({
        "resource": resource,
        "authorization_servers": [issuer],
        "scopes_supported": scopes,
        "bearer_methods_supported": ["header"],
        "resource_name": "chitin",
    })
}

/// The challenge of a request that carried no token.
pub fn missing_token(metadata_url: &str) -> String {
    format!("Bearer resource_metadata=\"{}\"", quoted(metadata_url))
}

/// The challenge of a request whose token was refused.
pub fn invalid_token(metadata_url: &str, description: &str) -> String {
    format!(
        "Bearer resource_metadata=\"{}\", error=\"invalid_token\", error_description=\"{}\"",
        quoted(metadata_url),
        quoted(description)
    )
}

/// The challenge of a request whose token lacks a scope; `scopes` are those that would do (none:
/// no scope reaches what was asked).
pub fn insufficient_scope(metadata_url: &str, scopes: &[&str]) -> String {
    let mut challenge = format!(
        "Bearer resource_metadata=\"{}\", error=\"insufficient_scope\"",
        quoted(metadata_url)
    );
    if !scopes.is_empty() {
        challenge.push_str(&format!(", scope=\"{}\"", quoted(&scopes.join(" "))));
    }
    challenge
}

/// Text safe inside a quoted-string of a header: printable ASCII without `"` or `\`.
fn quoted(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            ' '..='~' if c != '"' && c != '\\' => c,
            _ => '\'',
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_url_puts_the_well_known_path_before_the_resource_path() {
        let resource = Url::parse("https://tools.example:8443/mcp").expect("url");
        assert_eq!(
            url(&resource),
            "https://tools.example:8443/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            paths(&resource),
            [
                "/.well-known/oauth-protected-resource/mcp",
                "/.well-known/oauth-protected-resource"
            ]
        );
        let root = Url::parse("https://tools.example/").expect("url");
        assert_eq!(
            url(&root),
            "https://tools.example/.well-known/oauth-protected-resource"
        );
        assert_eq!(paths(&root), ["/.well-known/oauth-protected-resource"]);
    }

    #[test]
    fn a_challenge_cannot_be_broken_out_of_by_its_description() {
        let header = invalid_token("https://a/x", "bad \"token\"\r\nX: y");
        assert_eq!(
            header,
            "Bearer resource_metadata=\"https://a/x\", error=\"invalid_token\", \
             error_description=\"bad 'token'''X: y\""
        );
    }
}
