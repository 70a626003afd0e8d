//! The WIT implementation of `chitin:host/process`.

use std::time::Duration;

use super::bindings::chitin::host::process::{Command, Error, Host, Output};
use super::{PROGRESS_EVERY, ProcessCtx, Request, RunError};
use crate::events::CallEvent;

impl From<RunError> for Error {
    fn from(e: RunError) -> Self {
        match e {
            RunError::NotGranted(m) => Self::NotGranted(m),
            RunError::InvalidCwd(m) => Self::InvalidCwd(m),
            RunError::EnvNotAllowed(m) => Self::EnvNotAllowed(m),
            RunError::Busy(m) => Self::Busy(m),
            RunError::Unconfined(m) => Self::Unconfined(m),
            RunError::SpawnFailed(m) => Self::SpawnFailed(m),
        }
    }
}

impl Host for &mut ProcessCtx {
    async fn run(&mut self, cmd: Command) -> Result<Output, Error> {
        let Some(config) = self.config.clone() else {
            return Err(Error::NotGranted(format!(
                "this component has no process grant, so it cannot run `{}` (its manifest needs \
                 a [capabilities.process] section naming the program)",
                cmd.program
            )));
        };
        let program = cmd.program.clone();
        let request = Request {
            program: cmd.program,
            args: cmd.args,
            cwd: cmd.cwd,
            stdin: cmd.stdin.unwrap_or_default(),
            timeout: cmd.timeout_ms.map(Duration::from_millis),
            env: cmd.env,
        };
        let total = request.timeout.map(|t| t.as_secs_f64());
        let scratch = match self.scratch.take() {
            Some(scratch) => scratch,
            None => config.scratch()?,
        };
        let done = {
            let run = config.run_in(&scratch, request, self.user.as_ref());
            tokio::pin!(run);
            let started = tokio::time::Instant::now();
            // The first tick one period from now: awaiting an immediate first tick costs up to a
            // millisecond (the timer rounds deadlines up to the next millisecond).
            let mut ticks = tokio::time::interval_at(started + PROGRESS_EVERY, PROGRESS_EVERY);
            loop {
                tokio::select! {
                    done = &mut run => break done,
                    _ = ticks.tick(), if self.events.is_listening() => {
                        let seconds = started.elapsed().as_secs();
                        self.events.emit(CallEvent::Progress {
                            done: started.elapsed().as_secs_f64(),
                            total,
                            message: Some(format!("`{program}` has been running for {seconds} s")),
                        });
                    }
                }
            }
        };
        self.scratch = Some(scratch);
        let done = done?;
        Ok(Output {
            exit_code: done.exit_code,
            signal: done.signal,
            stdout: done.stdout.bytes,
            stderr: done.stderr.bytes,
            stdout_truncated: done.stdout.truncated,
            stderr_truncated: done.stderr.truncated,
            timed_out: done.timed_out,
            duration_ms: u64::try_from(done.duration.as_millis()).unwrap_or(u64::MAX),
        })
    }
}
