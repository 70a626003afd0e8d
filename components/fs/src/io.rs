//! Mapping filesystem errors onto tool errors, naming the path.

use std::io;

use chitin_sdk::ToolError;

use crate::path::RelPath;

/// A tool error for an I/O failure on `path`. Denials by the host's preopen (outside the grant,
/// a symlink leading out, a read-only grant) surface as permission errors.
pub fn error(path: &RelPath, action: &str, err: io::Error) -> ToolError {
    let shown = path.display();
    match err.kind() {
        io::ErrorKind::NotFound => ToolError::not_found(format!("`{shown}` does not exist")),
        io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => {
            ToolError::permission_denied(format!(
                "cannot {action} `{shown}`: the workspace grant does not allow it ({err})"
            ))
        }
        io::ErrorKind::IsADirectory => {
            ToolError::invalid_args(format!("`{shown}` is a directory, not a file"))
        }
        io::ErrorKind::NotADirectory => {
            ToolError::invalid_args(format!("`{shown}`: a parent is not a directory"))
        }
        _ => ToolError::execution_failed(format!("cannot {action} `{shown}`: {err}")),
    }
}
