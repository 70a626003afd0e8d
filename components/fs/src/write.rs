//! `write_file` and `apply_patch`: the two tools that change files.

use std::fs;

use chitin_sdk::prelude::*;

use crate::Workspace;
use crate::io::error;
use crate::path::RelPath;

/// Largest file a write may produce (seed 000 §4.5 `MAX_WRITE_SIZE`).
pub const MAX_WRITE_BYTES: usize = 5 * 1024 * 1024;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// File path relative to the workspace root; missing parent directories are created
    pub path: String,
    /// The whole new content of the file
    pub content: String,
}

#[derive(Serialize, JsonSchema, Debug)]
pub struct WriteOutput {
    /// The path written, normalised
    pub path: String,
    /// Bytes written
    pub bytes: u64,
    /// Whether the file did not exist before
    pub created: bool,
}

/// Writes (creates or replaces) a file.
pub fn write_file(ws: &Workspace, args: WriteArgs) -> Result<WriteOutput, ToolError> {
    let path = RelPath::parse(&args.path)?;
    path.check_writable()?;
    written(&path, &ws.root)?.check_writable()?;
    check_size(&path, args.content.len())?;
    let target = path.under(&ws.root);
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent).map_err(|e| match e.kind() {
            // A parent that "exists" but cannot be entered: a file, or a symlink whose target
            // the grant does not reach.
            std::io::ErrorKind::AlreadyExists => ToolError::permission_denied(format!(
                "cannot create the parents of `{}`: one exists but is not a directory inside \
                 the grant",
                path.display()
            )),
            _ => error(&path, "create the parents of", e),
        })?;
    }
    let created = fs::symlink_metadata(&target).is_err();
    check_unshared(&path, &target)?;
    fs::write(&target, &args.content).map_err(|e| error(&path, "write", e))?;
    Ok(WriteOutput {
        path: path.display(),
        bytes: args.content.len() as u64,
        created,
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchArgs {
    /// File path relative to the workspace root
    pub path: String,
    /// Exact text to find; must occur exactly once unless replace_all is set
    pub old_string: String,
    /// Text to put in its place
    pub new_string: String,
    /// Replace every occurrence instead of requiring exactly one (default false)
    #[serde(default)]
    pub replace_all: bool,
}

#[derive(Serialize, JsonSchema, Debug)]
pub struct PatchOutput {
    /// The path patched, normalised
    pub path: String,
    /// How many occurrences were replaced
    pub replacements: u64,
    /// Size of the file after the patch, in bytes
    pub bytes: u64,
}

/// Replaces `old_string` with `new_string` in a file.
pub fn apply_patch(ws: &Workspace, args: PatchArgs) -> Result<PatchOutput, ToolError> {
    let path = RelPath::parse(&args.path)?;
    path.check_writable()?;
    written(&path, &ws.root)?.check_writable()?;
    let target = path.under(&ws.root);
    check_unshared(&path, &target)?;
    let text = fs::read_to_string(&target).map_err(|e| error(&path, "read", e))?;
    let patched = patch_text(&text, &args.old_string, &args.new_string, args.replace_all)
        .map_err(|e| ToolError::invalid_args(format!("`{}`: {e}", path.display())))?;
    check_size(&path, patched.text.len())?;
    fs::write(&target, &patched.text).map_err(|e| error(&path, "write", e))?;
    Ok(PatchOutput {
        path: path.display(),
        replacements: patched.count as u64,
        bytes: patched.text.len() as u64,
    })
}

/// Most symlinks followed in one path (Linux's `MAXSYMLINKS`).
const MAX_SYMLINKS: usize = 40;

/// The path a write to `path` changes: the symlinks in it followed, as far as it exists, so a
/// link cannot make a protected file writable under another name. A link that leads out of the
/// workspace (which the host's preopen refuses as well) is refused here.
fn written(path: &RelPath, root: &std::path::Path) -> Result<RelPath, ToolError> {
    let out = || {
        ToolError::permission_denied(format!(
            "`{}` leads through a symlink out of the workspace, or through too many",
            path.display()
        ))
    };
    let mut current = path.clone();
    for _ in 0..MAX_SYMLINKS {
        let parts = current.parts();
        let mut followed = None;
        for end in 1..=parts.len() {
            let on_disk = parts[..end]
                .iter()
                .fold(root.to_path_buf(), |p, n| p.join(n));
            match fs::symlink_metadata(&on_disk) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    let target = fs::read_link(&on_disk).map_err(|e| error(path, "read", e))?;
                    let target = target.to_str().ok_or_else(out)?;
                    if target.starts_with('/') {
                        return Err(out());
                    }
                    let joined = parts[..end - 1]
                        .iter()
                        .map(String::as_str)
                        .chain([target])
                        .chain(parts[end..].iter().map(String::as_str))
                        .collect::<Vec<_>>()
                        .join("/");
                    followed = Some(RelPath::parse(&joined).map_err(|_| out())?);
                    break;
                }
                Ok(_) => {}
                // Not there yet: the rest of the path is only a name.
                Err(_) => break,
            }
        }
        match followed {
            Some(next) => current = next,
            None => return Ok(current),
        }
    }
    Err(out())
}

/// Refuses a file that other names share (hard links), which may lie outside the workspace: a
/// write would change the file under all of them. The host refuses such a write as well; this
/// says why.
fn check_unshared(path: &RelPath, target: &std::path::Path) -> Result<(), ToolError> {
    match crate::tree::links(target) {
        Ok(names) if names > 1 => Err(ToolError::permission_denied(format!(
            "`{}` is one of {names} names (hard links) of one file, and the others may lie \
             outside the workspace; file tools never change a file other names share (write \
             a new file instead, or have the link broken outside chitin)",
            path.display()
        ))),
        _ => Ok(()),
    }
}

/// The result of a patch on text.
pub struct Patched {
    /// The new text.
    pub text: String,
    /// Occurrences replaced.
    pub count: usize,
}

/// Replaces `old` in `text`: exactly one occurrence, or all of them with `replace_all`. The
/// error says how many occurrences there are, so the caller can widen `old` or opt in.
pub fn patch_text(text: &str, old: &str, new: &str, replace_all: bool) -> Result<Patched, String> {
    if old.is_empty() {
        return Err("old_string is empty; give the exact text to replace".into());
    }
    let count = text.matches(old).count();
    match count {
        0 => Err("old_string not found (0 matches)".into()),
        1 => Ok(Patched {
            text: text.replacen(old, new, 1),
            count,
        }),
        _ if replace_all => Ok(Patched {
            text: text.replace(old, new),
            count,
        }),
        _ => Err(format!(
            "old_string matches {count} times; add surrounding context to make it unique, or \
             set replace_all to replace all {count}"
        )),
    }
}

fn check_size(path: &RelPath, bytes: usize) -> Result<(), ToolError> {
    if bytes > MAX_WRITE_BYTES {
        return Err(ToolError::invalid_args(format!(
            "`{}`: {bytes} bytes is over the {MAX_WRITE_BYTES}-byte write cap",
            path.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::patch_text;

    #[test]
    fn one_match_is_replaced() {
        let p = patch_text("a b c", "b", "x", false).unwrap();
        assert_eq!((p.text.as_str(), p.count), ("a x c", 1));
    }

    #[test]
    fn zero_or_several_matches_state_the_count() {
        assert_eq!(
            patch_text("abc", "z", "x", false).err().unwrap(),
            "old_string not found (0 matches)"
        );
        let err = patch_text("b b b", "b", "x", false).err().unwrap();
        assert!(err.starts_with("old_string matches 3 times"), "{err}");
        let p = patch_text("b b b", "b", "x", true).unwrap();
        assert_eq!((p.text.as_str(), p.count), ("x x x", 3));
    }

    #[test]
    fn empty_old_string_is_refused() {
        assert!(patch_text("abc", "", "x", true).is_err());
    }
}
