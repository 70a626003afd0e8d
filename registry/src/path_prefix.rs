//! Path prefixes of HTTP allow entries and credential mappings, matched on whole segments:
//! `/api/v1` admits `/api/v1`, `/api/v1/` and `/api/v1/x`, never `/api/v1-evil`. Empty
//! segments of a prefix are ignored, so `/v1/` and `/v1` admit the same paths.

/// A path prefix, as segments.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PathPrefix {
    segments: Vec<String>,
}

impl PathPrefix {
    /// The prefix `text` (as a manifest writes it, starting with `/`).
    pub fn new(text: &str) -> Self {
        Self {
            segments: text
                .split('/')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        }
    }

    /// Whether a path, given as its segments (those after the leading `/`, compared byte for
    /// byte as they are given), starts with this prefix's segments.
    pub fn admits<S: AsRef<[u8]>>(&self, path: impl IntoIterator<Item = S>) -> bool {
        let mut path = path.into_iter();
        self.segments
            .iter()
            .all(|want| path.next().is_some_and(|s| s.as_ref() == want.as_bytes()))
    }

    /// Whether the path `path` (as written, `/`-separated, not decoded) lies under this prefix.
    /// A path that does not start with `/` lies under none but the empty prefix, and only when
    /// it is empty.
    pub fn admits_path(&self, path: &str) -> bool {
        match path.strip_prefix('/') {
            Some(rest) => self.admits(rest.split('/')),
            None => path.is_empty() && self.segments.is_empty(),
        }
    }

    /// Whether every path `other` admits, this admits too.
    pub fn covers(&self, other: &PathPrefix) -> bool {
        other.segments.starts_with(&self.segments)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_match_whole_segments() {
        let v1 = PathPrefix::new("/api/v1");
        for path in ["/api/v1", "/api/v1/", "/api/v1/x", "/api/v1//x"] {
            assert!(v1.admits_path(path), "{path}");
        }
        for path in [
            "/api/v1-evil",
            "/api",
            "/",
            "",
            "//api/v1",
            "api/v1",
            "/API/v1",
            "*",
        ] {
            assert!(!v1.admits_path(path), "{path}");
        }
        assert_eq!(PathPrefix::new("/api/v1/"), v1);
        let root = PathPrefix::new("/");
        for path in ["/", "/x/y", ""] {
            assert!(root.admits_path(path), "{path}");
        }
        assert!(!root.admits_path("*"));
    }

    #[test]
    fn decoded_segments_are_compared_as_given() {
        let v1 = PathPrefix::new("/api/v1");
        assert!(v1.admits([b"api".to_vec(), b"v1".to_vec(), b"x".to_vec()]));
        assert!(!v1.admits([b"api".to_vec()]));
        assert!(
            !v1.admits_path("/api/%76%31"),
            "an undecoded path is not decoded"
        );
    }

    #[test]
    fn a_shorter_prefix_covers_a_longer_one_below_it() {
        let (api, v1) = (PathPrefix::new("/api"), PathPrefix::new("/api/v1"));
        assert!(api.covers(&v1));
        assert!(!v1.covers(&api));
        assert!(PathPrefix::new("/").covers(&api));
        assert!(!PathPrefix::new("/ap").covers(&api));
    }
}
