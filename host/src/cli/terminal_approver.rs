//! The CLI's approver: a prompt on the controlling terminal, `--yes` to pre-approve, and a
//! refusal saying how to approve when no terminal can be asked (a pipe, CI, a service).

use std::io::{BufRead, BufReader, Write};

use crate::approver::{ApprovalRequest, Approver, Decision};

/// Bytes of the arguments shown in a prompt.
const SHOWN_ARGS_BYTES: usize = 2000;

/// Asks the person at the terminal, or approves everything when they passed `--yes`.
#[derive(Debug, Clone, Copy)]
pub struct TerminalApprover {
    /// `--yes`: every request is approved without asking.
    pub pre_approved: bool,
}

#[async_trait::async_trait]
impl Approver for TerminalApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        if self.pre_approved {
            return Decision::Approved;
        }
        let request = request.clone();
        // Reading the terminal blocks; keep it off the async runtime.
        tokio::task::spawn_blocking(move || ask_on_terminal(&request))
            .await
            .unwrap_or_else(|e| Decision::Denied(format!("the approval prompt failed: {e}")))
    }
}

/// Prompt on `/dev/tty` (not stdin, which may carry the call's arguments).
fn ask_on_terminal(request: &ApprovalRequest) -> Decision {
    let tty = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    {
        Ok(tty) => tty,
        Err(_) => return Decision::Denied(nobody_to_ask(request)),
    };
    let mut out = match tty.try_clone() {
        Ok(out) => out,
        Err(_) => return Decision::Denied(nobody_to_ask(request)),
    };
    let args = shorten(&request.args_json, SHOWN_ARGS_BYTES);
    let prompt = format!(
        "\nchitin: `{}` ({}) needs your approval\n  why:  {}\n  args: {}\nApprove? [y/N] ",
        request.tool, request.component, request.reason, args
    );
    if out
        .write_all(prompt.as_bytes())
        .and_then(|()| out.flush())
        .is_err()
    {
        return Decision::Denied(nobody_to_ask(request));
    }
    let mut answer = String::new();
    if BufReader::new(tty).read_line(&mut answer).is_err() {
        return Decision::Denied(nobody_to_ask(request));
    }
    match answer.trim().to_lowercase().as_str() {
        "y" | "yes" => Decision::Approved,
        _ => Decision::Denied(format!(
            "the person at the terminal declined `{}` ({})",
            request.tool, request.reason
        )),
    }
}

fn nobody_to_ask(request: &ApprovalRequest) -> String {
    format!(
        "`{}` needs a person's approval ({}), but there is no terminal to ask: run the command \
         from a terminal, or pass --yes to approve in advance",
        request.tool, request.reason
    )
}

fn shorten(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let cut = text.floor_char_boundary(max);
    format!("{}… ({} bytes)", &text[..cut], text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> ApprovalRequest {
        ApprovalRequest {
            tool: "shell".into(),
            component: "chitin/shell".into(),
            reason: "irreversible".into(),
            args_json: "{}".into(),
        }
    }

    #[tokio::test]
    async fn yes_approves_without_asking() {
        let approver = TerminalApprover { pre_approved: true };
        assert_eq!(approver.approve(&request()).await, Decision::Approved);
    }

    #[test]
    fn the_refusal_says_how_to_approve() {
        let text = nobody_to_ask(&request());
        assert!(text.contains("--yes"), "{text}");
        assert!(text.contains("shell"), "{text}");
    }

    #[test]
    fn long_arguments_are_shortened_on_a_char_boundary() {
        let shown = shorten(&"é".repeat(100), 11);
        assert!(shown.starts_with("ééééé…"), "{shown}");
        assert!(shown.contains("200 bytes"), "{shown}");
    }
}
