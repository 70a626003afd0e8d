//! Identifiers: the names of namespaces, components, publishers, key-value buckets and invoke
//! aliases. One rule for all of them, so a name a trust store accepts is one a manifest can
//! carry.

use super::NAME_SEPARATOR;

/// Longest identifier accepted.
pub const MAX_IDENT: usize = 64;

/// A name that is not an identifier; the message says what one is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "is not a valid name (lower-case letters, digits, `_`, `-`; starts with a letter; at most \
     64 characters; no `__`, which separates namespace and tool in exposed names)"
)]
pub struct InvalidIdent;

/// Check `value`: lower-case ASCII letters, digits, `_` and `-`, starting with a letter, at most
/// [`MAX_IDENT`] characters, never [`NAME_SEPARATOR`].
pub fn check(value: &str) -> Result<(), InvalidIdent> {
    let ok = !value.is_empty()
        && value.len() <= MAX_IDENT
        && value.starts_with(|c: char| c.is_ascii_lowercase())
        && value
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        && !value.contains(NAME_SEPARATOR);
    if ok { Ok(()) } else { Err(InvalidIdent) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rule_for_every_identifier() {
        for good in ["acme", "a", "web-fetch", "my_tool2", &"a".repeat(MAX_IDENT)] {
            assert_eq!(check(good), Ok(()), "{good:?} refused");
        }
        let long = "a".repeat(MAX_IDENT + 1);
        for bad in [
            "", "Acme", "1acme", "-a", "_a", "a__b", "a/b", "a.b", "é", &long,
        ] {
            assert_eq!(check(bad), Err(InvalidIdent), "{bad:?} accepted");
        }
    }
}
